"""HumanEval loading, test conversion coverage, mutants and the by-problem split."""

from agentic_rl.tasks.code_tests import evaluate_predicate, predicate_namespace
from agentic_rl.tasks.humaneval import (
    LEVELS,
    candidate_mutants,
    convert_problem,
    load_problems,
    problem_split,
    visible_test_ids,
)


def test_all_164_problems_load_from_the_package():
    problems = load_problems()
    assert len(problems) == 164
    assert problems[0].task_id == "HumanEval/0" and problems[0].entry_point == "has_close_elements"
    first, last = problems[0].body_lines
    assert problems[0].solution.splitlines()[first - 1].strip().startswith("for idx")


def test_at_least_130_problems_keep_convertible_tests():
    kept = [p for p in load_problems() if convert_problem(p) is not None]
    assert len(kept) >= 130


def test_converted_tests_accept_the_canonical_results_computed_outside():
    # evaluate the canonical solution *here* (trusted) to check the conversion itself, not the sandbox
    problem = load_problems()[2]  # truncate_number: uses abs(candidate(x) - y) < 1e-6
    conv = convert_problem(problem)
    namespace = {}
    exec(problem.solution, namespace)
    func = namespace[problem.entry_point]
    ns = predicate_namespace(conv.imports)
    for test in conv.tests:
        values = {c.id: func(*eval(c.args_tuple())) for c in test.calls}
        assert evaluate_predicate(test, values, ns)[0], test.source
    assert any("abs(" in t.predicate for t in conv.tests)


def test_split_is_by_problem_and_stable():
    problems = load_problems()
    splits = {p.task_id: problem_split(p.task_id) for p in problems}
    assert splits == {p.task_id: problem_split(p.task_id) for p in problems}
    n_test = sum(1 for s in splits.values() if s == "test")
    assert 16 <= n_test <= 50


def test_candidate_mutants_respect_their_level():
    problem = load_problems()[0]
    for level in LEVELS:
        candidates = candidate_mutants(problem, level)
        assert candidates, level
        assert candidates == candidate_mutants(problem, level)  # deterministic
        for c in candidates:
            compiles = True
            try:
                compile(c.buggy_code, "solution.py", "exec")
            except SyntaxError:
                compiles = False
            assert compiles == (level != 0)
            assert len(c.mutations) == (2 if level == 3 else 1)
            assert c.buggy_code.startswith(problem.prompt)  # the docstring is never mutated


def test_visible_tests_show_a_failing_test_first():
    conv = convert_problem(load_problems()[0])
    assert visible_test_ids(conv.tests, failing=["t3", "t5"]) == ["t0", "t3"]
    assert visible_test_ids(conv.tests, failing=[t.id for t in conv.tests]) == ["t0", "t1"]


def test_a_failing_test_always_stays_hidden():
    """Showing every failing test would let code that returns the visible answers pass everything."""
    conv = convert_problem(load_problems()[0])
    ids = [t.id for t in conv.tests]
    assert visible_test_ids(conv.tests, failing=["t3"]) == ["t0", "t1"]  # the only failing test is hidden
    two = conv.tests[:2]
    assert visible_test_ids(two, failing=["t0", "t1"]) == ["t0"]
    assert visible_test_ids(two, failing=["t1"]) == ["t0"]
    for failing in (ids[:1], ids[:2], ids):
        shown = visible_test_ids(conv.tests, failing=failing)
        assert set(failing) - set(shown), failing
