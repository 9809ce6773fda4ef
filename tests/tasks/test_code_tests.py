"""Converting asserts into sandbox calls + outside predicates."""

import pytest

from agentic_rl.tasks.code_tests import (
    TestConversionError,
    TestSpec,
    convert_asserts,
    convert_check,
    evaluate_predicate,
    predicate_namespace,
)

CHECK = '''
METADATA = {}

def check(candidate):
    import math
    assert candidate([1, 2, 3]) == 6, "message " + str(candidate([0]))
    assert abs(candidate([0.1, 0.2]) - 0.3) < 1e-6
    xs = list(range(4))
    assert candidate(xs) == sum(xs)
    assert candidate((1, 2)) == candidate([1, 2])
    assert True, "no candidate here"
    for i in range(3):
        assert candidate([i]) == i
    assert math.isclose(candidate([math.pi]), math.pi)
'''


def test_convert_check_splits_calls_from_expectations():
    conv = convert_check(CHECK)
    by_id = {t.id: t for t in conv.tests}
    assert [t.id for t in conv.tests] == ["t0", "t1", "t2", "t3", "t4"]
    # only the arguments go into the sandbox; the expected value stays in the predicate
    assert [c.args for c in by_id["t0"].calls] == ["[1, 2, 3]"]
    assert by_id["t0"].predicate == "__r0 == 6"
    # helper variables are evaluated outside and inlined as literals
    assert by_id["t2"].calls[0].args == "[0, 1, 2, 3]" and by_id["t2"].predicate == "__r0 == sum([0, 1, 2, 3])"
    # a tuple argument stays one argument once wrapped for the harness
    assert by_id["t3"].calls[0].args_tuple() == "((1, 2),)"
    assert by_id["t4"].calls[0].args == "[3.141592653589793]"
    assert conv.imports == ["math"]
    assert len(conv.dropped) == 1 and "for statement" in conv.dropped[0]


def test_predicate_evaluation_uses_exact_decoded_values():
    conv = convert_check(CHECK)
    ns = predicate_namespace(conv.imports)
    t1 = conv.tests[1]
    assert evaluate_predicate(t1, {"t1.0": 0.30000000000000004}, ns) == (True, "")
    assert evaluate_predicate(t1, {"t1.0": 0.4}, ns)[0] is False
    # a predicate that crashes on a bad value is a failed test, not an exception
    passed, message = evaluate_predicate(t1, {"t1.0": "0.3"}, ns)
    assert not passed and "TypeError" in message


def test_convert_asserts_for_task_files():
    conv = convert_asserts(["average([1, 2]) == 1.5", "assert average([4]) == 4", "xs = [2, 4]",
                            "average(xs) == 3"], "average")
    assert [t.predicate for t in conv.tests] == ["__r0 == 1.5", "__r0 == 4", "__r0 == 3"]
    assert conv.tests[2].calls[0].args == "[2, 4]"


@pytest.mark.parametrize("line,reason", [
    ("f(f(1)) == 2", "nested"),
    ("f(x=1) == 2", "keyword"),
    ("f(undefined_name) == 1", "cannot be evaluated"),
    ("f(1) == helper(2)", "unknown name"),
    ("[f(i) for i in range(3)] == [0, 1, 2]", "cannot be evaluated"),
])
def test_unconvertible_asserts_are_dropped_with_a_reason(line, reason):
    conv = convert_asserts([line], "f")
    assert conv.tests == [] and reason in conv.dropped[0]


def test_disallowed_imports_and_bad_specs_are_rejected():
    with pytest.raises(TestConversionError, match="not allowed"):
        predicate_namespace(["os"])
    conv = convert_asserts(["import os", "f(1) == 1"], "f")
    assert "not allowed" in conv.dropped[0]
    with pytest.raises(TestConversionError, match="predicate"):
        TestSpec.from_dict({"id": "t0", "calls": [{"id": "c", "args": "1"}], "predicate": "=="})
    with pytest.raises(TestConversionError, match="calls"):
        TestSpec.from_dict({"id": "t0", "calls": [], "predicate": "True"})
