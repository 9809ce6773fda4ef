"""Host-side workspaces: the only directory a sandboxed program can write that outlives it.

Where the host allows mounts (root), each workspace is its own size- and inode-limited tmpfs, so disk
fills and million-file programs hit a wall instead of the host disk; elsewhere it is a plain directory.
Host-side file helpers never follow symlinks the sandboxed program may have planted.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_mount_state: dict[str, bool] = {}
_mount_lock = threading.Lock()


def _mount_tmpfs(path: Path, size_bytes: int, inodes: int) -> bool:
    """Mount a private tmpfs at `path`; False (once logged) where the host does not allow it."""
    if os.environ.get("AGENTIC_RL_SANDBOX_NO_MOUNT") or _mount_state.get("disabled"):
        return False
    options = f"size={size_bytes},nr_inodes={inodes},mode=0755".encode()
    if _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0:
        return True
    with _mount_lock:
        if not _mount_state.get("disabled"):
            _mount_state["disabled"] = True
            log.info("sandbox workspaces are plain directories (no size quota): mount failed: %s",
                     os.strerror(ctypes.get_errno()))
    return False


def _unmount(path: Path) -> None:
    _libc.umount2(str(path).encode(), _MNT_DETACH)


def default_base_dir() -> Path:
    """Where workspaces live on the host: `$AGENTIC_RL_SANDBOX_DIR`, else /dev/shm where each workspace
    gets its own quota-limited tmpfs (creating directories on a disk costs milliseconds per execution),
    else the system temp dir."""
    configured = os.environ.get("AGENTIC_RL_SANDBOX_DIR")
    if configured:
        return Path(configured)
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and _can_mount():
        return shm / "agentic-rl"
    return Path(tempfile.gettempdir())


def _can_mount() -> bool:
    if "can_mount" not in _mount_state:
        probe = Path(tempfile.mkdtemp(prefix="agentic-rl-probe-"))
        mounted = _mount_tmpfs(probe, 1 << 20, 16)
        if mounted:
            _unmount(probe)
        probe.rmdir()
        _mount_state["can_mount"] = mounted
    return _mount_state["can_mount"]


def _force_rmtree(path: Path) -> None:
    def retry_writable(function, target, _exc):  # a program may have chmod 000'ed its own dirs
        try:
            os.chmod(os.path.dirname(target), stat.S_IRWXU)
            if not os.path.islink(target):  # chmod follows symlinks: never touch what one points at
                os.chmod(target, stat.S_IRWXU)
            function(target)
        except OSError:
            pass

    try:
        shutil.rmtree(path, onerror=retry_writable)
    except RecursionError:
        # Python < 3.12 recurses once per directory level; a program can nest thousands. rm -rf walks any
        # depth and, like rmtree, never follows symlinks.
        subprocess.run(["rm", "-rf", "--", str(path)], check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def remove_stale(base_dir: Path) -> None:
    """Unmount and remove workspaces whose owning process no longer exists (after a crash)."""
    for path in Path(base_dir).glob("agentic-rl-*-*-*"):
        owner = path.name.split("-")[3]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            _unmount(path)
            _force_rmtree(path)


class WorkspaceDir:
    """A throwaway host directory (`path`), destroyed by `destroy()`; `mounted` when it is a tmpfs."""

    def __init__(self, size_mb: int, max_files: int, base_dir: Path | None = None, prefix: str = "ws-"):
        base = Path(base_dir) if base_dir is not None else default_base_dir()
        base.mkdir(parents=True, exist_ok=True)
        # The owner's pid in the name lets `remove_stale` clean up after a process that crashed.
        self.path = Path(tempfile.mkdtemp(prefix=f"agentic-rl-{prefix}{os.getpid()}-", dir=base))
        self.mounted = _mount_tmpfs(self.path, size_mb << 20, max_files)
        self._destroyed = False

    def destroy(self) -> None:
        """Remove every file (idempotent)."""
        if self._destroyed:
            return
        self._destroyed = True
        if self.mounted:
            _unmount(self.path)
        try:
            self.path.rmdir()  # the usual case: an empty mount point
        except OSError:
            _force_rmtree(self.path)

    # -- host-side file helpers (relative paths, never following symlinks) ---------------------------

    def resolve(self, relative: str) -> Path:
        """The host path of `relative`, refusing absolute paths, `..` and symlinked parents."""
        if not isinstance(relative, str) or not relative or "\x00" in relative:
            raise ValueError(f"workspace path must be a non-empty string, got {relative!r}")
        parts = Path(relative).parts
        if Path(relative).is_absolute() or ".." in parts:
            raise ValueError(f"workspace path must stay inside the workspace: {relative!r}")
        current = self.path
        for part in parts[:-1]:
            current = current / part
            if current.is_symlink():
                raise ValueError(f"workspace path goes through a symlink: {relative!r}")
        return self.path.joinpath(*parts)

    def write_file(self, relative: str, content: str | bytes) -> None:
        target = self.resolve(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else bytes(content)
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            target.unlink()  # a planted symlink, FIFO or socket: replace it with a regular file
        # O_NONBLOCK: opening a FIFO for writing would otherwise wait forever for a reader.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        with os.fdopen(fd, "wb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ValueError(f"not a regular file: {relative!r}")
            handle.write(data)

    def read_bytes(self, relative: str) -> bytes:
        target = self.resolve(relative)
        try:
            # O_NONBLOCK: opening a FIFO the program planted would otherwise wait forever for a writer.
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if target.is_symlink():
                raise ValueError(f"refusing to follow a symlink in the workspace: {relative!r}") from exc
            raise
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ValueError(f"not a regular file: {relative!r}")
            return handle.read()

    def list_files(self) -> list[str]:
        # An explicit stack, not os.walk: Python < 3.12 recurses once per level, and a program can nest
        # directories deeper than the recursion limit. Unreadable directories are skipped, as os.walk does.
        found, pending = [], [""]
        while pending:
            relative = pending.pop()
            try:
                with os.scandir(self.path / relative) as entries:
                    for entry in entries:
                        name = os.path.join(relative, entry.name) if relative else entry.name
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(name)
                        else:
                            found.append(name)
            except OSError:
                continue
        return sorted(found)

    def delete(self, relative: str) -> None:
        target = self.resolve(relative)
        if target.is_dir() and not target.is_symlink():
            _force_rmtree(target)
        else:
            target.unlink()
