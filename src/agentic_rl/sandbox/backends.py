"""Backends: how a command line is wrapped for isolation (`bwrap`) or run as is (`none`)."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from agentic_rl.sandbox.limits import SandboxUnavailable

log = logging.getLogger(__name__)

WORKSPACE = "/workspace"
"""Where the workspace appears inside a `bwrap` sandbox (also the working directory and $HOME)."""
AUX_DIR = "/run/agentic-rl"
"""Where trusted, read-only helper files (e.g. the grading harness) appear inside a `bwrap` sandbox."""

INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`; "
    "Arch: `pacman -S bubblewrap`) or, only for code you trust, opt out of isolation explicitly with "
    "Sandbox(backend='none') / `sandbox.backend: none` in the config."
)

# /etc entries programs commonly need (dynamic loader cache, Debian alternatives, time zone). The rest of
# /etc (shadow, ssh keys, host configs) never enters the sandbox.
_ETC_ALLOW = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "mime.types")
_SYNTHETIC_ETC = {
    "passwd": "root:x:0:0:root:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}


def python_prefix_and_executable() -> tuple[str, str]:
    """The host's base interpreter (a venv's underlying Python): (prefix, executable path)."""
    executable = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    return os.path.realpath(sys.base_prefix), executable


@functools.lru_cache(maxsize=1)
def bwrap_features() -> frozenset[str]:
    """Options of the installed bwrap we rely on when present (older versions lack some)."""
    try:
        text = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(opt for opt in ("--disable-userns", "--size", "--remount-ro") if opt in text)


@functools.lru_cache(maxsize=1)
def bwrap_probe() -> str | None:
    """None when `bwrap` can create a sandbox here, else why not (checked once per process)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (`bwrap`) is not installed"
    try:
        done = subprocess.run(
            ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--proc", "/proc", "--dev", "/dev", "/bin/true"],
            capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap could not start: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot create namespaces here: {done.stderr.strip()[:300]}"
    return None


def resolve_backend(backend: str) -> str:
    """'auto' -> 'bwrap' where it works, else SandboxUnavailable; 'none' logs a warning once."""
    if backend not in ("auto", "bwrap", "none"):
        raise ValueError(f"sandbox backend must be 'auto', 'bwrap' or 'none', got {backend!r}")
    if backend == "none":
        _warn_none_once()
        return "none"
    problem = bwrap_probe()
    if problem is not None:
        raise SandboxUnavailable(f"cannot run untrusted code safely: {problem}. {INSTALL_HINT}")
    return "bwrap"


@functools.lru_cache(maxsize=1)
def _warn_none_once() -> None:
    log.warning("sandbox backend 'none': programs run as plain subprocesses with rlimits only, with full "
                "access to this machine's files and network. Use it only for code you trust.")


def _root_layout() -> list[str]:
    """Read-only system directories, keeping merged-/usr symlinks as symlinks."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def write_synthetic_etc(directory: Path) -> None:
    """Small stand-ins for /etc/passwd & co (the host's are never shown)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in _SYNTHETIC_ETC.items():
        (directory / name).write_text(text)


def bwrap_prefix(
    python_prefix: str, etc_dir: Path, tmpfs_mb: int, extra_ro: list[tuple[str, str]]
) -> list[str]:
    """The fixed part of every bwrap command line (everything except the workspace and the command)."""
    features = bwrap_features()
    args = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--clearenv", "--hostname", "sandbox"]
    if "--disable-userns" in features:
        args.append("--disable-userns")  # no nested user namespaces: they re-grant capabilities
    path = f"{python_prefix}/bin:/usr/local/bin:/usr/bin:/bin"
    for key, value in (("PATH", path), ("HOME", WORKSPACE), ("TMPDIR", "/tmp"), ("LANG", "C.UTF-8"),
                       ("PYTHONDONTWRITEBYTECODE", "1"), ("USER", "root")):
        args += ["--setenv", key, value]
    args += _root_layout()
    for name in _ETC_ALLOW:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for name in _SYNTHETIC_ETC:
        args += ["--ro-bind", str(etc_dir / name), f"/etc/{name}"]
    if not python_prefix.startswith("/usr/"):
        args += ["--ro-bind", python_prefix, python_prefix]
    for source, dest in extra_ro:
        args += ["--ro-bind", source, dest]
    size = ["--size", str(tmpfs_mb << 20)] if "--size" in features else []
    shm = ["--size", str(min(tmpfs_mb, 16) << 20)] if "--size" in features else []
    args += [*size, "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", *shm, "--tmpfs", "/dev/shm"]
    # bwrap leaves /proc/sys writable (its own cover is skipped because the directory is mode 0555), and
    # sysctl writes check only the writer's uid: a sandbox run by root could set kernel.core_pattern to a
    # command the host kernel runs as root. The host's /proc/sys, bound read-only, shows the same values
    # (each sysctl reads from the opener's namespaces).
    args += ["--ro-bind", "/proc/sys", "/proc/sys"]
    if "--remount-ro" in features:
        args += ["--remount-ro", "/dev"]
    return args


def bwrap_command(
    prefix: list[str], workspace: Path, command: list[str],
    binds: list[tuple[str, str, bool]] = (),
) -> list[str]:
    """A complete bwrap command line: `prefix`, the workspace, per-run `binds` (source, dest, writable)."""
    args = [*prefix, "--bind", str(workspace), WORKSPACE]
    for source, dest, writable in binds:
        args += ["--bind" if writable else "--ro-bind", source, dest]
    if "--remount-ro" in bwrap_features():
        args += ["--remount-ro", "/"]  # the sandbox's root tmpfs: no writes outside workspace and /tmp
    return [*args, "--chdir", WORKSPACE, "--", *command]
