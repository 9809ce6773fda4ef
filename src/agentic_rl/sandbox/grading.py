"""Grading outside the sandbox: run trusted calls against agent code, compare results on the host.

Only the call list (function names and argument expressions) enters the sandbox. Expected values,
test files and the comparison stay on the host. A call counts as passed only when its result was
reported, decoded as exact builtin types, and `values_equal` to the expectation; a crash, `sys.exit`,
`os._exit`, atexit trick or timeout before a result is written leaves the call `missing`/`timeout`.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentic_rl.sandbox import backends, codec
from agentic_rl.sandbox.core import Sandbox, SandboxSession
from agentic_rl.sandbox.limits import ExecResult, Limits

STATUSES = ("ok", "exception", "timeout", "missing", "unserialisable")
_HARNESS_SOURCE = Path(__file__).with_name("harness.py")
_CODEC_SOURCE = Path(__file__).with_name("codec.py")
_MAX_RESULTS_BYTES = 64 << 20


@dataclass(frozen=True)
class Call:
    """One trusted call: `function(*eval(args))` inside the sandbox.

    `args` is a Python expression evaluating to the tuple of positional arguments, e.g. "([1, 2, 3], 2)";
    a non-tuple value is passed as the single argument.
    """

    id: str
    function: str
    args: str = "()"

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Call.id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.function, str) or not self.function.isidentifier():
            raise ValueError(f"Call.function must be a Python identifier, got {self.function!r} (call {self.id})")
        try:
            ast.parse(self.args, mode="eval")
        except (SyntaxError, TypeError, ValueError) as exc:
            raise ValueError(f"Call.args of call {self.id!r} is not a Python expression: {self.args!r}") from exc


@dataclass
class CallOutcome:
    """What happened to one call. `value` is the decoded return value when `status == "ok"`."""

    id: str
    status: str
    value: object = None
    error: str = ""

    def matches(self, expected: object, float_tol: float = 1e-6) -> bool:
        """True only when the call returned a value strictly equal to `expected`."""
        return self.status == "ok" and values_equal(self.value, expected, float_tol)


def values_equal(a: object, b: object, float_tol: float = 1e-6) -> bool:
    """Strict structural equality of decoded values: exact types (int, float and bool are all distinct),
    floats within `float_tol` (absolute or relative; NaN equals NaN), containers element by element."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=float_tol, abs_tol=float_tol)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(values_equal(x, y, float_tol) for x, y in zip(a, b, strict=True))
    if type(a) in (set, frozenset):
        return _typed_keys(a) == _typed_keys(b)
    if type(a) is dict:
        keyed_a = {_typed_key(k): v for k, v in a.items()}
        keyed_b = {_typed_key(k): v for k, v in b.items()}
        return keyed_a.keys() == keyed_b.keys() and all(
            values_equal(keyed_a[k], keyed_b[k], float_tol) for k in keyed_a)
    if type(a) in (type(None), bool, int, str, bytes):
        return a == b
    return False  # not a value the codec produces: never equal


def _typed_key(value: object) -> object:
    """A hashable form that keeps types apart (so 1, 1.0 and True are different keys)."""
    if type(value) is tuple:
        return ("tuple", tuple(_typed_key(v) for v in value))
    if type(value) is frozenset:
        return ("frozenset", _typed_keys(value))
    return (type(value).__name__, value)


def _typed_keys(values: Iterable) -> frozenset:
    return frozenset(_typed_key(v) for v in values)


def run_calls(
    target: Sandbox | SandboxSession,
    module_file: str,
    calls: Sequence[Call],
    files: dict[str, str | bytes] | None = None,
    limits: Limits | None = None,
    call_timeout_s: float = 2.0,
) -> dict[str, CallOutcome]:
    """Run `calls` against the functions of `module_file` (relative to the workspace) in a fresh sandbox.

    With a `Sandbox`, a throwaway workspace is made from `files`; with a `SandboxSession`, its workspace
    is used (`files` are written into it first). Each call gets `call_timeout_s`; the whole run gets
    `limits.wall_time_s`. Returns one CallOutcome per call id, in call order.
    """
    outcomes, _ = run_calls_detailed(target, module_file, calls, files, limits, call_timeout_s)
    return outcomes


def run_calls_detailed(
    target: Sandbox | SandboxSession,
    module_file: str,
    calls: Sequence[Call],
    files: dict[str, str | bytes] | None = None,
    limits: Limits | None = None,
    call_timeout_s: float = 2.0,
) -> tuple[dict[str, CallOutcome], ExecResult]:
    """`run_calls`, also returning the harness process's ExecResult (for logs and observations)."""
    calls = list(calls)
    ids = [call.id for call in calls]
    if len(set(ids)) != len(ids):
        raise ValueError(f"call ids must be unique, got duplicates in {ids}")
    if not isinstance(module_file, str) or not module_file.endswith(".py"):
        raise ValueError(f"module_file must be a relative path to a .py file, got {module_file!r}")
    if isinstance(target, Sandbox):
        with target.session() as session:
            return _run_in_session(session, module_file, calls, files, limits, call_timeout_s)
    return _run_in_session(target, module_file, calls, files, limits, call_timeout_s)


def _run_in_session(
    session: SandboxSession,
    module_file: str,
    calls: list[Call],
    files: dict[str, str | bytes] | None,
    limits: Limits | None,
    call_timeout_s: float,
) -> tuple[dict[str, CallOutcome], ExecResult]:
    session.workspace_dir.resolve(module_file)  # validates the path (no absolute / `..`)
    for name, content in (files or {}).items():
        session.write_file(name, content)
    sandbox = session.sandbox
    aux = Path(tempfile.mkdtemp(prefix=f"agentic-rl-grade-{os.getpid()}-", dir=sandbox.base_dir))
    try:
        (aux / "harness").mkdir()
        (aux / "out").mkdir()
        shutil.copyfile(_HARNESS_SOURCE, aux / "harness" / "harness.py")
        shutil.copyfile(_CODEC_SOURCE, aux / "harness" / "_agentic_codec.py")
        results = aux / "out" / "results.jsonl"
        results.touch()
        if sandbox.backend == "bwrap":
            inside = backends.AUX_DIR
            # Only the results file itself is writable: a mount point cannot be unlinked or renamed, so
            # the program cannot swap it for a FIFO (the host's read would block forever), a directory
            # or a symlink to a host file, nor fill the host's disk with new files beside it.
            binds = [(str(aux / "harness"), f"{inside}/harness", False),
                     (str(results), f"{inside}/out/results.jsonl", True)]
        else:
            inside, binds = str(aux), []
        argv = [*sandbox.python_argv(), f"{inside}/harness/harness.py",
                sandbox.workspace_path_inside(session.workspace_dir), module_file,
                f"{inside}/out/results.jsonl", repr(float(call_timeout_s))]
        payload = json.dumps([{"id": c.id, "function": c.function, "args": c.args} for c in calls])
        result = session.execute(argv, stdin=payload, limits=limits, binds=binds)
        reported = _read_results(results)
    finally:
        shutil.rmtree(aux, ignore_errors=True)
    return _collect(calls, reported, result), result


def _read_results(path: Path) -> bytes:
    """The report file's first bytes; empty when it is not a regular file (backend 'none' lets the program
    replace it). Never follows a symlink and never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return b""
        return handle.read(_MAX_RESULTS_BYTES)


def _collect(calls: list[Call], reported: bytes, result: ExecResult) -> dict[str, CallOutcome]:
    wanted = {call.id for call in calls}
    lines_by_id: dict[str, set[bytes]] = {}
    for line in reported.splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # the program can write anything here, e.g. '[' * 10**5
            continue
        # The file is writable by agent code: a forged id may be any JSON value (a list is unhashable).
        if isinstance(record, dict) and isinstance(record.get("id"), str) and record["id"] in wanted:
            lines_by_id.setdefault(record["id"], set()).add(line.strip())
    outcomes = {}
    for call in calls:
        lines = lines_by_id.get(call.id)
        if not lines:
            status = "timeout" if result.timed_out else "missing"
            outcomes[call.id] = CallOutcome(call.id, status, error=f"no result reported ({result.summary()})"
                                            + _stderr_tail(result))
        elif len(lines) > 1:
            outcomes[call.id] = CallOutcome(call.id, "missing", error="conflicting results reported")
        else:
            outcomes[call.id] = _outcome_from(call.id, json.loads(next(iter(lines))))
    return outcomes


def _outcome_from(call_id: str, record: dict) -> CallOutcome:
    status = record.get("status")
    if status == "ok":
        try:
            return CallOutcome(call_id, "ok", value=codec.decode(record.get("value")))
        except (ValueError, TypeError, OverflowError):
            return CallOutcome(call_id, "unserialisable", error="malformed value reported")
    if status in ("exception", "timeout", "unserialisable"):
        return CallOutcome(call_id, status, error=str(record.get("error", ""))[:1000])
    return CallOutcome(call_id, "missing", error=f"malformed result record (status {status!r})")


def _stderr_tail(result: ExecResult) -> str:
    tail = result.stderr.strip()[-300:]
    return f": {tail}" if tail else ""
