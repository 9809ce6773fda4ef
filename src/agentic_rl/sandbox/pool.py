"""`SandboxPool`: a bounded number of sandboxed executions at once, shared by many callers."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from agentic_rl.sandbox.core import Command, Sandbox, SandboxSession
from agentic_rl.sandbox.limits import ExecResult, Limits


class SandboxPool:
    """Runs at most `max_concurrency` sandboxed programs at a time (default: the number of CPU cores).

    Callers block in `run` until a slot is free. The pool reuses one `Sandbox` (its prepared command line,
    cgroup parent and private files); workspaces and processes are never reused between executions.
    """

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        max_concurrency: int | None = None,
        backend: str = "auto",
        limits: Limits | None = None,
    ):
        self.sandbox = sandbox if sandbox is not None else Sandbox(backend=backend, limits=limits)
        self.max_concurrency = max_concurrency or os.cpu_count() or 1
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        self._slots = threading.BoundedSemaphore(self.max_concurrency)

    def run(
        self,
        argv: Command,
        files: dict[str, str | bytes] | None = None,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """`Sandbox.run`, waiting for a free slot first."""
        with self._slots:
            return self.sandbox.run(argv, files=files, stdin=stdin, limits=limits)

    def run_python(
        self,
        code: str,
        files: dict[str, str | bytes] | None = None,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """`Sandbox.run_python`, waiting for a free slot first."""
        with self._slots:
            return self.sandbox.run_python(code, files=files, stdin=stdin, limits=limits)

    def map(self, jobs: Iterable[Command | Mapping]) -> list[ExecResult]:
        """Run many jobs concurrently (bounded), results in input order.

        Each job is a command (argv list or shell string) or a mapping of `run` keyword arguments, e.g.
        `{"argv": [...], "files": {...}, "stdin": ..., "limits": ...}` or `{"code": "..."}` for Python.
        """
        jobs = list(jobs)
        if not jobs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(jobs))) as executor:
            return list(executor.map(self._run_job, jobs))

    def _run_job(self, job: Command | Mapping) -> ExecResult:
        if isinstance(job, str | Sequence) and not isinstance(job, Mapping):
            return self.run(job)
        options = dict(job)
        if "code" in options:
            return self.run_python(options.pop("code"), **options)
        return self.run(options.pop("argv"), **options)

    def session(self) -> PooledSession:
        """A `SandboxSession` whose commands also wait for a pool slot."""
        return PooledSession(self.sandbox, self._slots)


class PooledSession(SandboxSession):
    """A session whose `run`/`run_python` calls count against the pool's concurrency bound."""

    def __init__(self, sandbox: Sandbox, slots: threading.BoundedSemaphore):
        super().__init__(sandbox)
        self._slots = slots

    def execute(
        self,
        argv: Command,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
        binds: Sequence[tuple[str, str, bool]] = (),
    ) -> ExecResult:
        with self._slots:
            return super().execute(argv, stdin=stdin, limits=limits, binds=binds)
