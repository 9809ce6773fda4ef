"""The seed's code-repair reward: every term alone and in combination, on hand-made cases."""

import pytest

from agentic_rl.rewards import (
    CodeRepairWeights,
    code_repair_reward,
    combine,
    introduces_new_error,
    neutralise,
    step_cost,
    total,
)


def reward(**kwargs):
    return total(code_repair_reward(**kwargs))


def test_compiles_only_earns_the_compile_term():
    terms = code_repair_reward(compiles=True, passed=0, total=4, new_error=False)
    assert terms == {"outcome/compiles": 0.2, "outcome/partial": 0.0, "outcome/all_pass": 0.0, "outcome/new_error": 0.0}


def test_partial_pass_adds_point_three_times_the_fraction():
    assert reward(compiles=True, passed=1, total=4, new_error=False) == pytest.approx(0.2 + 0.3 * 0.25)
    assert reward(compiles=True, passed=3, total=4, new_error=False) == pytest.approx(0.2 + 0.3 * 0.75)


def test_all_pass_earns_everything():
    terms = code_repair_reward(compiles=True, passed=5, total=5, new_error=False)
    assert terms["outcome/all_pass"] == 1.0
    assert total(terms) == pytest.approx(1.5)


def test_new_error_costs_half_a_point_on_top_of_what_still_passes():
    assert reward(compiles=True, passed=2, total=4, new_error=True) == pytest.approx(0.2 + 0.15 - 0.5)


def test_syntax_error_scores_zero_or_minus_half_when_it_broke_a_compiling_file():
    assert reward(compiles=False, passed=0, total=3, new_error=False) == 0.0
    assert reward(compiles=False, passed=0, total=3, new_error=True) == pytest.approx(-0.5)


def test_new_error_definition():
    # a test that passed before fails now
    assert introduces_new_error(baseline_compiles=True, baseline_passed=["t0", "t1"], compiles=True, passed=["t1", "t2"])
    # the file stopped compiling
    assert introduces_new_error(baseline_compiles=True, baseline_passed=[], compiles=False, passed=[])
    # still failing what failed, passing more: no new error
    assert not introduces_new_error(baseline_compiles=True, baseline_passed=["t0"], compiles=True, passed=["t0", "t3"])
    # a file that never compiled cannot newly stop compiling
    assert not introduces_new_error(baseline_compiles=False, baseline_passed=[], compiles=False, passed=[])


def test_weights_are_configurable_and_inputs_checked():
    weights = CodeRepairWeights(compiles=0.0, partial=1.0, all_pass=0.0, new_error=-1.0)
    assert reward(compiles=True, passed=1, total=2, new_error=True, weights=weights) == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="total"):
        code_repair_reward(compiles=True, passed=0, total=0, new_error=False)
    with pytest.raises(ValueError, match="passed"):
        code_repair_reward(compiles=True, passed=5, total=4, new_error=False)
    with pytest.raises(ValueError, match="compile"):
        code_repair_reward(compiles=False, passed=1, total=4, new_error=False)


def test_term_helpers():
    merged = combine({"outcome": 1.0, "step_cost": -0.01}, step_cost(0.02))
    assert merged == {"outcome": 1.0, "step_cost": pytest.approx(-0.03)}
    hidden = neutralise({"outcome/all_pass": 1.0, "outcome/partial": 0.3, "step_cost": -0.1})
    assert hidden == {"outcome/all_pass": 0.0, "outcome/partial": 0.0, "step_cost": -0.1}
    with pytest.raises(ValueError, match="not finite"):
        combine({"outcome": float("nan")})
