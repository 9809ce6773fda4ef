"""Per-execution cgroups: memory and process-count limits for a whole process tree.

Supports cgroup v2 (when the memory and pids controllers can be delegated to children of the cgroup this
process lives in) and the v1 `memory` + `pids` controllers. Each execution gets fresh child cgroups
*below* the current process's own cgroup, so limits set above us (a container's) still apply.
Everything here is best effort: `CgroupManager.detect()` returns None where cgroups cannot be used, and
the sandbox then relies on rlimits alone.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_PARENT_NAME = "agentic-rl"
_counter = itertools.count()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root, mountpoint, fstype, super options) for each cgroup mount of this process."""
    found = []
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[3], fields[4], tail[0], tail[2]))
    return found


def _own_paths() -> dict[str, str]:
    """Controller name ('' for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                paths[controller] = parts[2]
    return paths


def _host_dir(mount_root: str, mountpoint: str, own: str) -> Path:
    relative = os.path.relpath(own, mount_root) if own.startswith(mount_root) else own.lstrip("/")
    return Path(mountpoint) / ("" if relative == "." else relative)


@dataclass
class CgroupHandle:
    """The cgroup(s) of one execution. `procs_files` are what the launcher writes its own pid into."""

    version: int
    dirs: list[Path]
    procs_files: list[str]

    def peak_memory_bytes(self) -> int | None:
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        for directory in self.dirs:
            text = _read(directory / name).strip()
            if text.isdigit():
                return int(text)
        return None

    def oom_killed(self) -> bool:
        """True when the kernel's OOM killer fired inside this cgroup."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        for directory in self.dirs:
            for line in _read(directory / name).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                    return True
        return False

    def pids(self) -> set[int]:
        found: set[int] = set()
        for directory in self.dirs:
            found.update(int(p) for p in _read(directory / "cgroup.procs").split() if p.isdigit())
        return found

    def kill_all(self) -> None:
        """SIGKILL every process still in the cgroup (repeats while a fork races with us)."""
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            try:
                _write(self.dirs[0] / "cgroup.kill", "1")
            except OSError:
                pass
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)

    def destroy(self) -> bool:
        """Kill what is left and remove the directories. False when one is still busy."""
        self.kill_all()
        removed = True
        for directory in self.dirs:
            for attempt in range(20):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    # Killed tasks leave the cgroup asynchronously; give them a moment.
                    time.sleep(0.005 * (attempt + 1))
            else:
                removed = False
        return removed


class CgroupManager:
    """Creates and removes per-execution cgroups under a parent owned by this process tree."""

    def __init__(self, version: int, parents: list[Path]):
        self.version = version
        self.parents = parents
        self._lock = threading.Lock()
        self._leftovers: list[CgroupHandle] = []

    @classmethod
    def detect(cls) -> CgroupManager | None:
        """A manager if this machine lets us create limited cgroups, else None (logged at debug level)."""
        if os.environ.get("AGENTIC_RL_SANDBOX_NO_CGROUPS"):
            return None
        for factory in (cls._detect_v1, cls._detect_v2):
            try:
                manager = factory()
            except OSError as exc:
                log.debug("cgroups unavailable: %s", exc)
                manager = None
            if manager is not None:
                return manager
        return None

    @classmethod
    def _detect_v1(cls) -> CgroupManager | None:
        own = _own_paths()
        parents = []
        for controller in ("memory", "pids"):
            mount = next((m for m in _mounts() if m[2] == "cgroup" and controller in m[3].split(",")), None)
            if mount is None or controller not in own:
                return None
            parent = _host_dir(mount[0], mount[1], own[controller]) / _PARENT_NAME
            parent.mkdir(exist_ok=True)
            parents.append(parent)
        return cls._checked(cls(1, parents))

    @classmethod
    def _detect_v2(cls) -> CgroupManager | None:
        own = _own_paths().get("")
        mount = next((m for m in _mounts() if m[2] == "cgroup2"), None)
        if own is None or mount is None:
            return None
        base = _host_dir(mount[0], mount[1], own)
        if not {"memory", "pids"} <= set(_read(base / "cgroup.controllers").split()):
            return None
        if not {"memory", "pids"} <= set(_read(base / "cgroup.subtree_control").split()):
            # Fails (EBUSY) when processes live in `base` itself: then we cannot delegate.
            _write(base / "cgroup.subtree_control", "+memory +pids")
        parent = base / _PARENT_NAME
        parent.mkdir(exist_ok=True)
        if "memory" not in _read(parent / "cgroup.subtree_control"):
            _write(parent / "cgroup.subtree_control", "+memory +pids")
        return cls._checked(cls(2, [parent]))

    @staticmethod
    def _checked(manager: CgroupManager) -> CgroupManager:
        manager.create(64 << 20, 8).destroy()  # probe: limits writable, rmdir allowed
        manager.remove_stale()
        atexit.register(manager._retry_leftovers)
        return manager

    def remove_stale(self) -> None:
        """Remove empty execution cgroups left behind by processes that no longer exist."""
        for parent in self.parents:
            for child in parent.glob("sbx-*-*"):
                owner = child.name.split("-")[1]
                if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                    try:
                        child.rmdir()
                    except OSError:
                        pass

    def create(self, memory_bytes: int, pids_max: int) -> CgroupHandle:
        """Fresh cgroup(s) with the given limits. Raises OSError when the kernel refuses."""
        self._retry_leftovers()
        name = f"sbx-{os.getpid()}-{next(_counter)}"
        dirs = [parent / name for parent in self.parents]
        for directory in dirs:
            directory.mkdir()
        handle = CgroupHandle(self.version, dirs, [str(d / "cgroup.procs") for d in dirs])
        try:
            if self.version == 1:
                memory_dir, pids_dir = dirs
                _write(memory_dir / "memory.limit_in_bytes", str(memory_bytes))
                if (memory_dir / "memory.memsw.limit_in_bytes").exists():
                    _write(memory_dir / "memory.memsw.limit_in_bytes", str(memory_bytes))
                _write(pids_dir / "pids.max", str(pids_max))
            else:
                _write(dirs[0] / "memory.max", str(memory_bytes))
                if (dirs[0] / "memory.swap.max").exists():
                    _write(dirs[0] / "memory.swap.max", "0")
                _write(dirs[0] / "pids.max", str(pids_max))
        except OSError:
            handle.destroy()
            raise
        return handle

    def release(self, handle: CgroupHandle) -> None:
        """Destroy `handle`; one still busy is retried on later calls."""
        if not handle.destroy():
            with self._lock:
                self._leftovers.append(handle)

    def _retry_leftovers(self) -> None:
        with self._lock:
            pending, self._leftovers = self._leftovers, []
        for handle in pending:
            self.release(handle)
