"""Failure categories on crafted episodes; the statistics behind eval tables (hand-computed values)."""

from __future__ import annotations

import pytest
from crafted import episode, solved, turn

from agentic_rl.evaluate.failures import analyze_failures, categorize
from agentic_rl.evaluate.stats import (
    mcnemar_exact,
    paired_bootstrap_ci,
    pass_at_k,
    two_proportion_p,
    wilson_interval,
)

ANSWER_WRONG = turn("<answer>41</answer>", terms={"outcome": 0.0}, kind="answer", terminated=True)

CASES = {
    "env_error": episode([turn("<action>make</action>")], termination="error:env_error"),
    "timeout": episode([turn("<action>sleep 99</action>", error="timeout"), ANSWER_WRONG]),
    "parse_error": episode([turn("blah", error="parse_error"), turn("blah blah", error="parse_error"), ANSWER_WRONG]),
    "loop": episode([turn("<action>ls</action>")] * 3 + [turn("<action>pwd</action>", truncated=True)]),
    "wrong_tool": episode([turn('<tool>{"name": "search"}</tool>', error="unknown_tool", kind="tool_call"),
                           ANSWER_WRONG]),
    "tool_error": episode([turn('<tool>{"name": "calc", "arguments": {"x": "1/0"}}</tool>', error="tool_error",
                                kind="tool_call"), ANSWER_WRONG]),
    "wrong_answer": episode([turn("<action>ls</action>"), turn("<action>cat a</action>"), ANSWER_WRONG]),
    "out_of_steps": episode([turn("<action>ls</action>"), turn("<action>cd a</action>"),
                             turn("<action>cat b</action>", truncated=True)]),
}
EXPECTED = {"timeout": "env_error"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_failure_gets_its_category(name):
    assert categorize(CASES[name]) == EXPECTED.get(name, name)


def test_analysis_counts_failures_and_keeps_the_shortest_example():
    long_wrong = episode([turn("<action>ls</action>")] + [turn(f"<action>cat {i}</action>") for i in range(4)]
                         + [ANSWER_WRONG], task_id="long")
    short_wrong = episode([ANSWER_WRONG], task_id="short")
    report = analyze_failures([solved(), long_wrong, short_wrong, CASES["loop"], solved("b")])
    assert report.total_episodes == 5 and report.failed == 3
    assert report.counts == {"loop": 1, "wrong_answer": 2}
    assert report.examples["wrong_answer"].task_id == "short"
    assert [r["category"] for r in report.table()] == ["loop", "wrong_answer"]
    assert report.table()[1]["share"] == pytest.approx(2 / 3)


def test_wilson_interval_matches_hand_computation():
    low, high = wilson_interval(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_pass_at_k_unbiased_estimator():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 4, 2) == 1.0
    assert pass_at_k(4, 0, 4) == 0.0
    with pytest.raises(ValueError, match="at least 3 samples"):
        pass_at_k(2, 1, 3)


def test_significance_tests():
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert two_proportion_p(10, 20, 10, 20) == pytest.approx(1.0)
    assert two_proportion_p(2, 20, 15, 20) < 0.001
    low, high = paired_bootstrap_ci([1.0] * 10)
    assert low == high == 1.0
    low, high = paired_bootstrap_ci([-1.0, 1.0] * 20)
    assert low < 0 < high
