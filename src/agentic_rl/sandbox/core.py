"""`Sandbox` (one fresh isolated process per execution) and `SandboxSession` (a workspace per episode)."""

from __future__ import annotations

import logging
import os
import signal as signal_module
import tempfile
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

from agentic_rl.sandbox import backends, process
from agentic_rl.sandbox.cgroups import CgroupManager
from agentic_rl.sandbox.limits import ExecResult, Limits, SandboxError
from agentic_rl.sandbox.workspace import WorkspaceDir, default_base_dir, remove_stale

log = logging.getLogger(__name__)

_cgroup_manager: CgroupManager | None = None
_cgroup_checked = False
_cgroup_lock = threading.Lock()


def _cgroups() -> CgroupManager | None:
    global _cgroup_manager, _cgroup_checked
    with _cgroup_lock:
        if not _cgroup_checked:
            _cgroup_checked = True
            _cgroup_manager = CgroupManager.detect()
            if _cgroup_manager is None:
                log.info("sandbox: cgroups unavailable; memory and process limits are per-process rlimits")
        return _cgroup_manager


Command = Sequence[str] | str
_MAX_INLINE_CODE = 64 << 10  # Linux caps one argv string at 128 KiB
# Keeps the workspace as sys.path[0], as `python -c` would; the code is read from a read-only file.
_RUN_FILE = "__file__ = {path!r}; exec(compile(open(__file__).read(), __file__, 'exec'))"


def _as_argv(command: Command) -> list[str]:
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    argv = [str(part) for part in command]
    if not argv:
        raise ValueError("command must be a non-empty argv list or a shell string")
    return argv


def _as_bytes(data: str | bytes | None) -> bytes | None:
    if data is None:
        return None
    return data.encode() if isinstance(data, str) else bytes(data)


class Sandbox:
    """Runs untrusted programs, each in a fresh isolated process with `limits`.

    `backend`: 'auto' (bwrap where it works; otherwise raises SandboxUnavailable saying how to install it
    or opt out), 'bwrap', or 'none' (plain subprocess with rlimits: no isolation; explicit opt-in only).
    `python`: the interpreter `run_python` uses inside; default the host's base interpreter (a venv's
    underlying Python), whose install prefix is bound read-only. `ro_paths`: extra host paths made
    visible read-only at the same place. Thread-safe: one Sandbox may serve many threads.
    """

    def __init__(
        self,
        backend: str = "auto",
        limits: Limits | None = None,
        python: str | None = None,
        ro_paths: Sequence[str] = (),
        base_dir: str | os.PathLike | None = None,
    ):
        self.backend = backends.resolve_backend(backend)
        self.limits = limits or Limits()
        prefix, executable = backends.python_prefix_and_executable()
        self.python = python or executable
        self._python_prefix = prefix
        self.base_dir = Path(base_dir) if base_dir is not None else default_base_dir()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        remove_stale(self.base_dir)
        self._private = Path(tempfile.mkdtemp(prefix=f"agentic-rl-sandbox-{os.getpid()}-", dir=self.base_dir))
        weakref.finalize(self, _remove_tree, self._private)
        self._cgroups = _cgroups()
        self._prefix_cache: dict[int, list[str]] = {}
        self._ro_paths = [(os.path.realpath(p), os.path.realpath(p)) for p in ro_paths]
        if self.backend == "bwrap":
            backends.write_synthetic_etc(self._private / "etc")

    # -- one-shot executions ------------------------------------------------------------------------

    def run(
        self,
        argv: Command,
        files: dict[str, str | bytes] | None = None,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run `argv` (a list, or a string for `/bin/sh -c`) in a fresh workspace holding `files`."""
        with self._session_with(files) as session:
            return session.run(argv, stdin=stdin, limits=limits)

    def run_python(
        self,
        code: str,
        files: dict[str, str | bytes] | None = None,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run Python source `code` in a fresh workspace holding `files` (see `SandboxSession.run_python`)."""
        with self._session_with(files) as session:
            return session.run_python(code, stdin=stdin, limits=limits)

    def _session_with(self, files: dict[str, str | bytes] | None) -> SandboxSession:
        session = self.session()
        try:
            for name, content in (files or {}).items():
                session.write_file(name, content)
        except BaseException:
            session.close()
            raise
        return session

    def session(self) -> SandboxSession:
        """A workspace that persists across commands until closed (use as a context manager)."""
        return SandboxSession(self)

    # -- internals shared with sessions and grading -------------------------------------------------

    def python_argv(self, code: str | None = None) -> list[str]:
        """Interpreter flags used for untrusted Python: no environment variables, no user site, no `site`
        (so planted `.pth` / `sitecustomize.py` files do nothing), no bytecode files."""
        argv = [self.python, "-E", "-s", "-S", "-B"]
        return argv if code is None else [*argv, "-c", code]

    def workspace_path_inside(self, workspace: WorkspaceDir) -> str:
        """How a program sees `workspace`: a fixed path under bwrap, the host path under 'none'."""
        return backends.WORKSPACE if self.backend == "bwrap" else str(workspace.path)

    def execute(
        self,
        workspace: WorkspaceDir,
        argv: Command,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
        binds: Sequence[tuple[str, str, bool]] = (),
    ) -> ExecResult:
        """Run one command in a fresh sandbox process over `workspace`.

        `binds`: extra (host path, inside path, writable) mounts for trusted helpers; under 'none' the
        program sees host paths, so callers pass host paths in `argv` there.
        """
        limits = limits or self.limits
        command = _as_argv(argv)
        cgroup = None
        if self._cgroups is not None:
            try:
                cgroup = self._cgroups.create(int(limits.memory_mb) << 20, int(limits.max_processes))
            except OSError as exc:
                log.warning("sandbox: could not create a cgroup (%s); rlimits only for this run", exc)
        memory = int(limits.memory_mb)
        # With a cgroup the address-space rlimit is only a backstop (virtual size >> resident size).
        address_space = max(4 * memory, memory + 1024) if cgroup is not None else memory
        launcher = process.prologue(limits, address_space, cgroup.procs_files if cgroup else [],
                                    nproc=cgroup is None)
        if self.backend == "bwrap":
            full = backends.bwrap_command(self._bwrap_prefix(limits), workspace.path, command, list(binds))
            env, cwd = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, str(self._private)
        else:
            full = command
            env = {"PATH": f"{self._python_prefix}/bin:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                   "HOME": str(workspace.path), "PYTHONDONTWRITEBYTECODE": "1"}
            cwd = str(workspace.path)
        try:
            raw = process.execute([*launcher, *full], env, cwd, _as_bytes(stdin), limits,
                                  kill_tree=cgroup.kill_all if cgroup else None)
        finally:
            peak = cgroup.peak_memory_bytes() if cgroup else None
            oom = cgroup.oom_killed() if cgroup else False
            if cgroup is not None:
                self._cgroups.release(cgroup)
        return self._result(raw, peak, oom)

    def _bwrap_prefix(self, limits: Limits) -> list[str]:
        key = int(limits.tmpfs_mb)
        if key not in self._prefix_cache:
            self._prefix_cache[key] = backends.bwrap_prefix(
                self._python_prefix, self._private / "etc", key, self._ro_paths)
        return self._prefix_cache[key]

    def _result(self, raw: process.RawResult, peak_bytes: int | None, oom: bool) -> ExecResult:
        exit_code, sig = None, None
        if raw.status is not None:
            if os.WIFSIGNALED(raw.status):
                sig = os.WTERMSIG(raw.status)
            else:
                exit_code = os.WEXITSTATUS(raw.status)
                # bwrap (like a shell) reports a child killed by signal n as exit status 128 + n.
                if self.backend == "bwrap" and 128 < exit_code <= 128 + 64:
                    exit_code, sig = None, exit_code - 128
        if exit_code == process.LAUNCH_FAILED_EXIT and raw.stderr.startswith(b"agentic-rl sandbox:"):
            log.warning("sandbox launch failed: %s", raw.stderr[:200].decode(errors="replace"))
        timed_out = raw.timed_out or sig == signal_module.SIGXCPU
        if peak_bytes is None and self.backend == "none" and raw.maxrss_kb:
            peak_bytes = raw.maxrss_kb * 1024
        return ExecResult(
            exit_code=exit_code, signal=sig, timed_out=timed_out,
            oom_killed=oom,
            output_truncated=raw.truncated or raw.output_killed,
            stdout=raw.stdout.decode("utf-8", errors="replace"),
            stderr=raw.stderr.decode("utf-8", errors="replace"),
            wall_time_s=raw.wall_time_s,
            peak_memory_mb=None if peak_bytes is None else peak_bytes / (1 << 20),
            backend=self.backend,
        )

    def close(self) -> None:
        """Remove this sandbox's private host files (also done when it is garbage collected)."""
        _remove_tree(self._private)

    def __repr__(self) -> str:
        return f"Sandbox(backend={self.backend!r}, limits={self.limits!r})"


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


class SandboxSession:
    """A per-episode workspace: files persist across commands; each command runs in a fresh sandbox.

    The workspace is destroyed by `close()` (or leaving the `with` block). `workspace` is the host-side
    path; programs see it as `/workspace` under bwrap. Relative paths only; symlinks planted by the
    program are never followed by the host-side helpers.
    """

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        limits = sandbox.limits
        self._dir = WorkspaceDir(limits.workspace_mb, limits.max_workspace_files, sandbox.base_dir)
        self._finalizer = weakref.finalize(self, self._dir.destroy)
        self._lock = threading.Lock()

    @property
    def workspace(self) -> Path:
        return self._dir.path

    @property
    def workspace_dir(self) -> WorkspaceDir:
        return self._dir

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError("this sandbox session is closed")

    def write_file(self, path: str, content: str | bytes) -> None:
        """Create or replace `path` (relative to the workspace), creating parent directories."""
        self._check_open()
        self._dir.write_file(path, content)

    def read_file(self, path: str) -> str:
        """Text of `path` (UTF-8, undecodable bytes replaced). FileNotFoundError when missing."""
        self._check_open()
        return self._dir.read_bytes(path).decode("utf-8", errors="replace")

    def read_bytes(self, path: str) -> bytes:
        self._check_open()
        return self._dir.read_bytes(path)

    def list_files(self) -> list[str]:
        """Every file (and symlink) in the workspace, relative, sorted."""
        self._check_open()
        return self._dir.list_files()

    def read_all(self, unreadable: str = "\x00<unreadable>") -> dict[str, str]:
        """Every workspace file's text by relative path; a file that cannot be read (a planted symlink,
        a directory race) maps to ``unreadable`` instead of raising."""
        out = {}
        for path in self.list_files():
            try:
                out[path] = self.read_file(path)
            except (OSError, ValueError):
                out[path] = unreadable
        return out

    def delete_file(self, path: str) -> None:
        """Remove a file, symlink or directory tree. FileNotFoundError when missing."""
        self._check_open()
        self._dir.delete(path)

    def run(self, argv: Command, stdin: str | bytes | None = None, limits: Limits | None = None) -> ExecResult:
        """Run a command (list, or string for `/bin/sh -c`) in a fresh sandbox over this workspace."""
        return self.execute(argv, stdin=stdin, limits=limits)

    def run_python(self, code: str, stdin: str | bytes | None = None, limits: Limits | None = None) -> ExecResult:
        """Run Python source `code` with the workspace as working directory (its modules importable).

        The interpreter runs without `site`, environment variables or user site (see `Sandbox.python_argv`).
        """
        if len(code) <= _MAX_INLINE_CODE:
            return self.execute(self.sandbox.python_argv(code), stdin=stdin, limits=limits)
        # Too long for one command-line argument: pass it as a read-only file outside the workspace.
        aux = Path(tempfile.mkdtemp(prefix=f"agentic-rl-code-{os.getpid()}-", dir=self.sandbox.base_dir))
        try:
            (aux / "main.py").write_text(code)
            bwrap = self.sandbox.backend == "bwrap"
            inside = f"{backends.AUX_DIR}/code" if bwrap else str(aux)
            binds = [(str(aux), inside, False)] if bwrap else []
            argv = [*self.sandbox.python_argv(), "-c", _RUN_FILE.format(path=f"{inside}/main.py")]
            return self.execute(argv, stdin=stdin, limits=limits, binds=binds)
        finally:
            _remove_tree(aux)

    def execute(
        self,
        argv: Command,
        stdin: str | bytes | None = None,
        limits: Limits | None = None,
        binds: Sequence[tuple[str, str, bool]] = (),
    ) -> ExecResult:
        """`Sandbox.execute` over this workspace (the one place every command of the session goes through)."""
        self._check_open()
        return self.sandbox.execute(self._dir, argv, stdin=stdin, limits=limits, binds=binds)

    def close(self) -> None:
        """Destroy the workspace and everything in it (idempotent)."""
        self._finalizer()

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
