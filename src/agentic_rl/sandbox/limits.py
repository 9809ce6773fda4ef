"""Resource limits and the result of one sandboxed execution."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


class SandboxError(RuntimeError):
    """The sandbox itself could not be set up (never raised for anything the sandboxed program did)."""


class SandboxUnavailable(SandboxError):
    """No isolation backend is available on this machine; the message says how to install one or opt out."""


@dataclass(frozen=True)
class Limits:
    """Per-execution resource limits. Every field is enforced for each fresh sandbox process.

    Units are in the names. Memory and process counts are enforced through cgroups where the machine
    allows it (whole process tree), with rlimits (per process) as the backstop everywhere.
    """

    wall_time_s: float = 10.0
    """Wall-clock budget; the watchdog kills the whole process tree when it runs out (`timed_out`)."""
    cpu_time_s: float = 10.0
    """CPU seconds per process (RLIMIT_CPU): SIGXCPU at the limit, SIGKILL one second later."""
    memory_mb: int = 512
    """Memory of the whole tree (cgroup; swap included). Without cgroups: address space per process."""
    max_processes: int = 64
    """Processes/threads alive at once in the tree (cgroup `pids.max`)."""
    max_file_size_mb: int = 16
    """Largest file any process may write (RLIMIT_FSIZE; SIGXFSZ / EFBIG beyond)."""
    max_open_files: int = 256
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    max_output_bytes: int = 1 << 20
    """Bytes kept of stdout and of stderr (each). More is discarded and sets `output_truncated`; a
    program that keeps writing past 8x this amount is killed."""
    tmpfs_mb: int = 64
    """Size of the private `/tmp` (and of `/dev/shm`, capped at 16 MiB) inside the sandbox."""
    workspace_mb: int = 128
    """Size of the workspace file system, where the host can mount one (root); see docs/sandbox.md."""
    max_workspace_files: int = 20_000
    """Inodes (files + directories) of the workspace file system, where the host can mount one."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{field.name} must be a positive number, got {value!r}")

    def replace(self, **changes: float) -> Limits:
        """A copy with some fields changed, e.g. `limits.replace(wall_time_s=2)`."""
        return dataclasses.replace(self, **changes)


@dataclass
class ExecResult:
    """What one sandboxed execution did. Built for every run; never an exception.

    `exit_code` is None when the program was killed by a signal (then `signal` is set). Under the `bwrap`
    backend the status passes through bwrap, so a program that calls `exit(128 + n)` itself is reported as
    killed by signal n (the same convention as a POSIX shell).
    """

    exit_code: int | None
    signal: int | None
    timed_out: bool
    oom_killed: bool
    output_truncated: bool
    stdout: str
    stderr: str
    wall_time_s: float
    peak_memory_mb: float | None
    backend: str

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0 and was not stopped by a limit."""
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    def summary(self) -> str:
        """One line for logs and observations, e.g. `exit 1 (0.12 s)` or `timeout after 2.00 s`."""
        if self.timed_out:
            status = f"timeout after {self.wall_time_s:.2f} s"
        elif self.oom_killed:
            status = "killed: out of memory"
        elif self.signal is not None:
            status = f"killed by signal {self.signal}"
        else:
            status = f"exit {self.exit_code}"
        extra = ", output truncated" if self.output_truncated else ""
        return f"{status} ({self.wall_time_s:.2f} s{extra})"
