"""Launch one command under limits, pump its pipes, and enforce the wall clock from outside.

The launcher is a tiny `/bin/sh` prologue (cheaper than a Python wrapper, and safe with threads, unlike
`preexec_fn`): it moves itself into the execution's cgroups, sets rlimits, then `exec`s the real command
(bwrap, or the program itself for the `none` backend). Everything here is backend-agnostic.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

from agentic_rl.sandbox.limits import Limits

LAUNCH_FAILED_EXIT = 125
"""Exit status of the prologue when it cannot join a cgroup or set a limit (stderr says which)."""

_READ_CHUNK = 1 << 16
_KILL_FACTOR = 8  # a program still writing past 8x the output cap is killed, not drained forever
_DRAIN_GRACE_S = 0.25


_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 311, "s390x": 280}.get(platform.machine())
_KEYCTL_JOIN_SESSION_KEYRING = 1
_libc = ctypes.CDLL(None, use_errno=True)


def fresh_session_keyring() -> None:
    """Give the calling thread, and so every child it starts next, a new empty session keyring.

    Kernel keyrings belong to no namespace bwrap creates: a child inherits its parent thread's session
    keyring (for root, the user-session keyring all root processes share), and could read the keys in it
    or plant new ones for the host. A new keyring per execution also keeps one sandbox's planted keys
    from the next. Best effort: where keyctl is refused (a container's seccomp filter), the sandboxed
    program inherits the same filter and cannot use keyrings either. The calling thread keeps the new
    keyring as its session keyring.
    """
    if _SYS_KEYCTL is not None:
        _libc.syscall(_SYS_KEYCTL, _KEYCTL_JOIN_SESSION_KEYRING, None)


def _shell_nproc_flag() -> str | None:
    shell = os.path.basename(os.path.realpath("/bin/sh"))
    return {"dash": "-p", "bash": "-u", "busybox": "-p"}.get(shell)


_NPROC_FLAG = _shell_nproc_flag()


def prologue(limits: Limits, address_space_mb: int, cgroup_procs: list[str], nproc: bool) -> list[str]:
    """`/bin/sh -c` argv that joins `cgroup_procs`, sets rlimits and execs the arguments that follow."""
    cpu = max(1, int(round(limits.cpu_time_s)))
    nproc_part = f" && ulimit {_NPROC_FLAG} {int(limits.max_processes)}" if nproc and _NPROC_FLAG else ""
    rlimits = (
        f"ulimit -c 0 && ulimit -n {int(limits.max_open_files)}"
        f" && ulimit -f {int(limits.max_file_size_mb) * 2048}"  # POSIX shells count 512-byte blocks
        f" && ulimit -v {int(address_space_mb) * 1024}"
        # SIGXCPU at the soft limit first, so a CPU hog is told apart from an OOM kill
        f" && ulimit -S -t {cpu} && ulimit -H -t {cpu + 1}{nproc_part}"
    )
    script = "\n".join([
        'for f in "$@"; do [ "$f" = "--" ] && break; shift;'
        ' echo $$ > "$f" || { echo "agentic-rl sandbox: cannot join cgroup $f" >&2; exit 125; }; done; shift',
        rlimits + ' || { echo "agentic-rl sandbox: cannot set rlimits" >&2; exit 125; }',
        'exec "$@"',
    ])
    return ["/bin/sh", "-c", script, "agentic-rl-launch", *cgroup_procs, "--"]


@dataclass
class RawResult:
    status: int | None  # os.wait4 status
    timed_out: bool
    output_killed: bool
    truncated: bool
    stdout: bytes
    stderr: bytes
    wall_time_s: float
    maxrss_kb: int


class _Capture:
    """Keeps the first `cap` bytes of a stream and counts the rest."""

    def __init__(self, cap: int):
        self.cap, self.total, self.chunks = cap, 0, []

    def add(self, data: bytes) -> None:
        room = self.cap - min(self.total, self.cap)
        if room > 0:
            self.chunks.append(data[:room])
        self.total += len(data)

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def value(self) -> bytes:
        return b"".join(self.chunks)


def execute(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    stdin: bytes | None,
    limits: Limits,
    kill_tree=None,
) -> RawResult:
    """Run `argv` (a full launcher command line) to completion or to its wall-clock deadline.

    `kill_tree` is an optional callable that kills every remaining process of this execution (the
    cgroup); it is called after a timeout and after the main process exits.
    """
    start = time.monotonic()
    fresh_session_keyring()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env, cwd=cwd, close_fds=True, start_new_session=True,
    )
    out, err = _Capture(limits.max_output_bytes), _Capture(limits.max_output_bytes)
    captures = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    timed_out = output_killed = False
    status, maxrss = None, 0
    selector = selectors.DefaultSelector()
    pidfd = os.pidfd_open(proc.pid)
    try:
        for fd in captures:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        selector.register(pidfd, selectors.EVENT_READ)
        pending_in = memoryview(stdin) if stdin else None
        if pending_in is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        deadline = start + limits.wall_time_s
        drain_until: float | None = None
        while selector.get_map():
            now = time.monotonic()
            limit_at = drain_until if drain_until is not None else deadline
            if now >= limit_at:
                if drain_until is not None:
                    break
                timed_out = True
                _kill_group(proc.pid, kill_tree)
                drain_until = now + _DRAIN_GRACE_S
                continue
            for key, _ in selector.select(timeout=limit_at - now):
                fd = key.fd
                if fd == pidfd:
                    selector.unregister(pidfd)
                    _, status, usage = os.wait4(proc.pid, 0)
                    maxrss = usage.ru_maxrss
                    if kill_tree is not None:
                        kill_tree()  # stragglers of the `none` backend; no-op under bwrap
                    drain_until = min(time.monotonic() + _DRAIN_GRACE_S, deadline)
                elif pending_in is not None and proc.stdin is not None and fd == proc.stdin.fileno():
                    pending_in = _feed(selector, proc, pending_in)
                else:
                    _read_into(selector, fd, captures[fd])
                    if captures[fd].total > _KILL_FACTOR * limits.max_output_bytes and not output_killed:
                        output_killed = True
                        _kill_group(proc.pid, kill_tree)
    finally:
        selector.close()
        if status is None:
            _kill_group(proc.pid, kill_tree)
            _, status, usage = os.wait4(proc.pid, 0)
            maxrss = usage.ru_maxrss
        proc.returncode = 0  # reaped above with wait4; keep Popen from waiting again
        os.close(pidfd)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
    return RawResult(status, timed_out, output_killed, out.truncated or err.truncated, out.value(),
                     err.value(), time.monotonic() - start, maxrss)


def _feed(selector: selectors.BaseSelector, proc: subprocess.Popen, pending: memoryview) -> memoryview | None:
    fd = proc.stdin.fileno()
    try:
        written = os.write(fd, pending[:_READ_CHUNK])
    except BlockingIOError:
        return pending
    except OSError:  # the program closed its stdin: it does not want the rest
        written = len(pending)
    pending = pending[written:]
    if len(pending) == 0:
        selector.unregister(fd)
        proc.stdin.close()
        return None
    return pending


def _read_into(selector: selectors.BaseSelector, fd: int, capture: _Capture) -> None:
    try:
        data = os.read(fd, _READ_CHUNK)
    except BlockingIOError:
        return
    except OSError as exc:
        if exc.errno != errno.EIO:
            raise
        data = b""
    if data:
        capture.add(data)
    else:
        selector.unregister(fd)


def _kill_group(pid: int, kill_tree) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if kill_tree is not None:
        kill_tree()
