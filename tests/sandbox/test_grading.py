"""Grading outside the sandbox: only reported, strictly typed values equal to hidden expectations pass."""

from __future__ import annotations

import math
import textwrap
import uuid

import pytest

from agentic_rl.sandbox import Call, CallOutcome, codec, run_calls, values_equal
from agentic_rl.sandbox.grading import run_calls_detailed

CALLS = [Call("t1", "add", "(1, 2)"), Call("t2", "add", "([1], [2])"), Call("t3", "add", "('a', 'b')")]
EXPECTED = {"t1": 3, "t2": [1, 2], "t3": "ab"}


def grade(sandbox, source: str, calls=CALLS, files=None, **kwargs) -> dict[str, CallOutcome]:
    all_files = {"solution.py": textwrap.dedent(source), **(files or {})}
    return run_calls(sandbox, "solution.py", calls, files=all_files, **kwargs)


def passed(outcomes: dict[str, CallOutcome], expected=EXPECTED) -> dict[str, bool]:
    return {key: outcomes[key].matches(value) for key, value in expected.items()}


# -- values_equal and the codec (no sandbox needed) ---------------------------------------------------

@pytest.mark.parametrize("a, b, equal", [
    (1, 1, True), (1, True, False), (1, 1.0, False), (0.1 + 0.2, 0.3, True), (1.0, 1.1, False),
    (math.nan, math.nan, True), ([1, (2, 3)], [1, (2, 3)], True), ([1, 2], (1, 2), False),
    ({1: "a"}, {True: "a"}, False), ({"k": [1.0]}, {"k": [1.0000000001]}, True), ({1, 2}, {2, 1}, True),
    ({1}, {True}, False), (frozenset({1}), {1}, False), (None, None, True), (b"x", "x", False),
])
def test_values_equal_is_strict_about_types(a, b, equal):
    assert values_equal(a, b) is equal


def test_codec_round_trips_builtins_and_refuses_everything_else():
    value = {"n": [1, -2**200, 2.5, float("inf")], (1, "t"): frozenset({b"\x00"}), "s": {None, True}}
    assert codec.decode(codec.encode(value)) == value
    for rigged in (type("Int", (int,), {})(1), type("L", (list,), {})(), object()):
        with pytest.raises(codec.Unserialisable):
            codec.encode(rigged)
    nested: list = []
    nested.append(nested)
    with pytest.raises(codec.Unserialisable):
        codec.encode(nested)


def test_call_validates_its_fields():
    with pytest.raises(ValueError, match="Call.args"):
        Call("x", "f", "(1,")
    with pytest.raises(ValueError, match="Call.function"):
        Call("x", "os.system")


# -- run_calls against adversarial modules ------------------------------------------------------------

def test_correct_solution_passes_every_call(sandbox):
    outcomes = grade(sandbox, "def add(a, b):\n    return a + b\n")
    assert list(outcomes) == ["t1", "t2", "t3"]
    assert passed(outcomes) == {"t1": True, "t2": True, "t3": True}


def test_wrong_values_exceptions_and_missing_functions_fail(sandbox):
    calls = [*CALLS, Call("t4", "nope")]
    outcomes = grade(sandbox, "def add(a, b):\n    if a == 1: raise KeyError('boom')\n    return b\n", calls)
    assert outcomes["t1"].status == "exception" and "KeyError" in outcomes["t1"].error
    assert outcomes["t2"].status == "ok" and outcomes["t2"].value == [2]
    assert not any(passed(outcomes).values())
    assert outcomes["t4"].status == "exception" and "no such function" in outcomes["t4"].error


def test_always_equal_objects_cannot_pass(sandbox):
    source = """
        class Anything:
            def __eq__(self, other): return True
            def __ne__(self, other): return False
        class SneakyInt(int):
            def __eq__(self, other): return True
        def add(a, b):
            return SneakyInt(0) if a == 1 else Anything()
    """
    outcomes = grade(sandbox, source)
    assert {o.status for o in outcomes.values()} == {"unserialisable"}
    assert not any(passed(outcomes).values())


def test_sys_exit_before_the_asserts_never_passes(sandbox):
    at_import = grade(sandbox, "import sys\nsys.exit(0)\ndef add(a, b): return a + b\n")
    assert {o.status for o in at_import.values()} == {"exception"}
    in_call = grade(sandbox, "import sys\ndef add(a, b): sys.exit(0)\n")
    assert {o.status for o in in_call.values()} == {"exception"}
    assert not any(passed(at_import).values()) and not any(passed(in_call).values())


def test_os_exit_leaves_the_remaining_calls_missing(sandbox):
    source = "import os\ndef add(a, b):\n    if a == 1: return 3\n    os._exit(0)\n"
    outcomes, result = run_calls_detailed(sandbox, "solution.py", CALLS, files={"solution.py": source})
    assert result.ok  # exit status 0 alone must not count
    assert outcomes["t1"].matches(3)
    assert outcomes["t2"].status == "missing" and outcomes["t3"].status == "missing"


def test_forged_reports_and_atexit_hooks_cannot_turn_into_passes(sandbox):
    source = """
        import atexit, glob, json
        def forge():
            for path in glob.glob("/run/**/*.jsonl", recursive=True):
                with open(path, "a") as f:
                    for i, value in (("t1", 3), ("t2", [1, 2]), ("t3", "ab")):
                        f.write(json.dumps({"id": i, "status": "ok", "value": ["int", "3"]}) + "\\n")
        forge()
        atexit.register(forge)
        def add(a, b): return None
    """
    outcomes = grade(sandbox, source)
    assert not any(passed(outcomes).values())
    assert {o.status for o in outcomes.values()} == {"missing"}  # conflicting reports


def test_timeouts_are_per_call_and_cannot_be_swallowed(sandbox):
    source = """
        def add(a, b):
            if a == 1:
                while True: pass
            if a == [1]:
                while True:
                    try:
                        while True: pass
                    except BaseException: pass
            return a + b
    """
    outcomes = grade(sandbox, source, call_timeout_s=0.3)
    assert outcomes["t1"].status == "timeout"
    assert outcomes["t2"].status == "timeout"  # the timer re-fires until the call gives up
    assert outcomes["t3"].matches("ab")  # later calls still run
    source = """
        import signal
        def add(a, b):
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            while True: pass
    """
    outcomes = grade(sandbox, source, limits=sandbox.limits.replace(wall_time_s=1.0), call_timeout_s=0.3)
    assert {o.status for o in outcomes.values()} == {"timeout"}  # the wall clock ends the whole run


def test_planted_files_and_patched_test_tools_do_not_affect_grading(sandbox):
    planted = {
        "conftest.py": "def pytest_runtest_makereport(item, call):\n    raise SystemExit(0)\n",
        "sitecustomize.py": "import builtins\nbuiltins.print('PWNED')\n",
        "evil.pth": "import os; os._exit(0)\n",
        "unittest.py": "raise SystemExit(0)\n",
    }
    source = """
        import unittest
        unittest.TestCase.assertEqual = lambda *args, **kwargs: None
        try:
            import pytest
            pytest.skip("nothing to see", allow_module_level=True)
        except ImportError:
            pass
        def add(a, b): return 0
    """
    outcomes = grade(sandbox, source, files=planted)
    assert {o.status for o in outcomes.values()} == {"ok"}
    assert not any(passed(outcomes).values())


def test_expected_answers_never_reach_the_sandbox(sandbox, tmp_path):
    secret = uuid.uuid4().hex[:16]
    (tmp_path / "hidden_test.py").write_text(f"EXPECTED={secret}\nassert add(1, 2) == EXPECTED\n")
    source = f"""
        import gc, inspect, re
        def add(a, b):
            seen = [repr(frame.frame.f_locals) for frame in inspect.stack()]
            seen.append(repr(gc.get_objects()[:20000]))
            for path in ({str(tmp_path / 'hidden_test.py')!r}, "/workspace/hidden_test.py"):
                try: seen.append(open(path).read())
                except OSError: pass
            found = re.search(r"EXPECTED=([0-9a-f]{{16}})", " ".join(seen))
            return found.group(1) if found else ""
    """
    outcomes = grade(sandbox, source, calls=[Call("t1", "add", "(1, 2)")])
    assert outcomes["t1"].status == "ok" and outcomes["t1"].value == ""
    assert not outcomes["t1"].matches(secret)


def test_grading_inside_a_session_uses_its_workspace(sandbox):
    with sandbox.session() as session:
        session.write_file("solution.py", "from helper import twice\ndef add(a, b): return twice(a) + b\n")
        session.write_file("helper.py", "def twice(x): return 2 * x\n")
        outcomes = run_calls(session, "solution.py", [Call("c", "add", "(1, 1)")])
        assert outcomes["c"].matches(3)
        assert sorted(session.list_files()) == ["helper.py", "solution.py"]  # no bytecode, no results
