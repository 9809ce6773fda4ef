"""Deterministic ast mutation operators: what each does, and that the inverse restores the source."""

import pytest

from agentic_rl.tasks.mutations import LEVEL_OF, apply_mutations, choose, find_mutations

SOURCE = '''def f(xs, k):
    """Docstring with 3 numbers: 1, 2."""
    total = 0
    for i in range(len(xs)):
        if xs[i] < k and not xs[i] == 0:
            total += xs[i] * 2
    label = "big"
    flag = True
    swap = max(total, k)
    return -total
'''


def _by_op(op):
    return [m for m in find_mutations(SOURCE, 3) if m.operator == op]


@pytest.mark.parametrize("op,original,replacement", [
    ("flip_comparison", "xs[i] < k", "xs[i] <= k"),
    ("wrong_operator", "xs[i] * 2", "xs[i] // 2"),
    ("wrong_operator", "total += xs[i] * 2", "total -= xs[i] * 2"),
    ("wrong_operator", "xs[i] < k and not xs[i] == 0", "xs[i] < k or not xs[i] == 0"),
    ("off_by_one", "len(xs)", "len(xs) - 1"),
    ("wrong_constant", "True", "False"),
    ("wrong_constant", '"big"', "'bi'"),
    ("swap_arguments", "max(total, k)", "max(k, total)"),
    ("drop_negation", "not xs[i] == 0", "(xs[i] == 0)"),
    ("drop_negation", "-total", "total"),
    ("wrong_return", "return -total", "return None"),
    ("delete_line", '    label = "big"\n', ""),
    ("syntax_error", ":", ""),
])
def test_operator_produces_the_expected_edit(op, original, replacement):
    pairs = {(m.original, m.replacement) for m in _by_op(op)}
    assert (original, replacement) in pairs


def test_docstring_and_lines_outside_the_range_are_never_touched():
    mutations = find_mutations(SOURCE, 3)
    assert all(m.line >= 3 for m in mutations)
    assert not any("Docstring" in m.original for m in mutations)


def test_each_mutation_applies_and_its_inverse_restores_the_source():
    lines = SOURCE.splitlines(keepends=True)
    for m in find_mutations(SOURCE, 3):
        mutated = apply_mutations(SOURCE, [m])
        assert mutated != SOURCE
        try:
            compile(mutated, "x", "exec")
            compiles = True
        except SyntaxError:
            compiles = False
        assert compiles == (m.operator != "syntax_error"), m.describe()
        start = sum(len(x) for x in lines[: m.line - 1]) + m.col
        assert mutated[start: start + len(m.replacement)] == m.replacement
        inverse = mutated[:start] + m.original + mutated[start + len(m.replacement):]
        assert inverse == SOURCE, m.describe()


def test_two_mutations_compose_and_overlap_is_refused():
    a = next(m for m in _by_op("wrong_constant") if m.original == "True")
    b = _by_op("swap_arguments")[0]
    both = apply_mutations(SOURCE, [a, b])
    assert "False" in both and "max(k, total)" in both
    with pytest.raises(ValueError, match="overlap"):
        apply_mutations(SOURCE, [a, a])


def test_choice_is_deterministic_and_levels_cover_all_operators():
    mutations = find_mutations(SOURCE, 3)
    assert choose(mutations, "key", 5) == choose(mutations, "key", 5)
    assert choose(mutations, "key", 5) != choose(mutations, "other", 5)
    assert {m.operator for m in mutations} == set(LEVEL_OF)
