"""Grading a Python file against call/predicate tests: calls run in the sandbox, predicates run here.

The agent's module is imported inside a fresh sandbox process by :func:`agentic_rl.sandbox.run_calls`,
which sends back each call's serialised return value. Each test's predicate (the assert with the calls
replaced by their values) is then evaluated in this process on plain decoded data — the expected values
never enter the sandbox, and a test passes only when *its own id* is reported with every call ``ok`` and
the predicate true. Nothing depends on the exit code.

Inside the sandbox the calls carry random ids and run in a random order, so agent code cannot tell which
test it is answering from the order of calls (a counter in a global) or forge a result record for a
known test id (the harness's results file is reachable from agent code in the same process). What it
still can do is recognise an input by value: :func:`agentic_rl.rewards.special_casing` looks for that.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentic_rl.sandbox import Call, run_calls
from agentic_rl.tasks.code_tests import CallSpec, TestSpec, evaluate_predicate, predicate_namespace

MODULE_FILE = "solution.py"
_VALUE_CHARS = 200


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest test class

    id: str
    passed: bool
    message: str = ""  # why it failed (for the agent, on visible tests only)
    statuses: tuple[str, ...] = ()  # the call statuses ("ok", "exception", "timeout", ...)


@dataclass
class GradeReport:
    """Per-test outcome of one file. ``results`` follows the order of the tests given."""

    compiles: bool
    compile_error: str = ""
    results: dict[str, TestResult] = field(default_factory=dict)

    @property
    def passed_ids(self) -> list[str]:
        return [tid for tid, r in self.results.items() if r.passed]

    @property
    def passed(self) -> int:
        return len(self.passed_ids)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total

    def first_failure(self) -> TestResult | None:
        return next((r for r in self.results.values() if not r.passed), None)

    def statuses(self) -> set[str]:
        return {s for r in self.results.values() for s in r.statuses}


def compile_error(code: str, filename: str = MODULE_FILE) -> str:
    """``""`` when ``code`` compiles, else ``"line N: message"`` (compiling never runs the code)."""
    try:
        compile(code, filename, "exec")
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 3] + "..."


def grade(runner: Any, code: str, tests: Sequence[TestSpec], entry_point: str, *, imports: Iterable[str] = (),
          fresh: bool = True, limits: Any = None, rng: random.Random | None = None) -> GradeReport:
    """Grade ``code`` on ``tests``.

    ``runner`` is a ``Sandbox`` or a ``SandboxSession``. With ``fresh=True`` the file is sent along as the
    only file of a throwaway workspace (hidden grading: nothing the agent planted can interfere); with
    ``fresh=False`` the session's workspace is used as it is (``solution.py`` must already be there).
    A file that does not compile fails every test without running anything. ``rng`` draws the order and
    ids of the calls inside the sandbox (default: the OS's randomness, which agent code cannot predict).
    """
    error = compile_error(code)
    if error:
        failed = {t.id: TestResult(t.id, False, f"solution.py does not compile: {error}") for t in tests}
        return GradeReport(False, error, failed)
    outcomes = _run_shuffled(runner, [c for t in tests for c in t.calls], entry_point,
                             files={MODULE_FILE: code} if fresh else None, limits=limits,
                             rng=rng or random.SystemRandom())
    namespace = predicate_namespace(imports)
    report = GradeReport(True)
    for test in tests:
        report.results[test.id] = _judge(test, outcomes, namespace)
    return report


def _run_shuffled(runner: Any, specs: list[CallSpec], entry_point: str, *, files: dict | None, limits: Any,
                  rng: random.Random) -> dict[str, Any]:
    """Run the calls under random ids in a random order; the outcomes come back keyed by the real ids."""
    order = rng.sample(specs, len(specs))
    real_id = {f"c{rng.getrandbits(64):016x}": spec.id for spec in order}
    if len(real_id) != len(order):  # a 64-bit collision: fall back to positional ids (still shuffled)
        real_id = {f"c{i}": spec.id for i, spec in enumerate(order)}
    calls = [Call(opaque, entry_point, spec.args_tuple()) for opaque, spec in zip(real_id, order, strict=True)]
    outcomes = run_calls(runner, module_file=MODULE_FILE, calls=calls, files=files, limits=limits)
    return {real_id[opaque]: outcome for opaque, outcome in outcomes.items()}


def _judge(test: TestSpec, outcomes: dict, namespace: dict) -> TestResult:
    values: dict[str, Any] = {}
    statuses = []
    for call in test.calls:
        outcome = outcomes.get(call.id)
        status = getattr(outcome, "status", "missing")
        statuses.append(status)
        if status != "ok":
            detail = getattr(outcome, "error", "") or ""
            reason = {"missing": "no result (the program ended before this call, or the function is missing)",
                      "timeout": "timed out",
                      "unserialisable": "returned a value that is not plain data"}.get(status, "raised an exception")
            message = f"{test.source or test.predicate}: {entry_text(call.args)} {reason}"
            return TestResult(test.id, False, message + (f": {detail}" if detail else ""), tuple(statuses))
        values[call.id] = outcome.value
    passed, why = evaluate_predicate(test, values, namespace)
    if passed:
        return TestResult(test.id, True, "", tuple(statuses))
    got = ", ".join(f"({c.args}) returned {_short(values[c.id])}" for c in test.calls)
    return TestResult(test.id, False, f"{test.source or test.predicate}: {why}; call {got}", tuple(statuses))


def entry_text(args: str) -> str:
    return f"call ({args[:_VALUE_CHARS]})"


def visible_args(tests: Iterable[TestSpec]) -> list[Any]:
    """Every literal positional argument of the given tests' calls (for the special-casing check)."""
    out: list[Any] = []
    for test in tests:
        for call in test.calls:
            try:
                value = ast.literal_eval(f"({call.args},)") if call.args.strip() else ()
            except (ValueError, SyntaxError, TypeError, RecursionError):
                continue
            out.extend(value)
    return out
