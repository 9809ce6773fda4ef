"""Advantage estimators against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from agentic_rl.algos import (
    advantages,
    efficiency_bonus,
    register_advantage,
    registered_advantages,
    steps_to_tokens,
)


def _single_step(rewards):
    r = torch.tensor(rewards, dtype=torch.float32)[:, None]
    return r, torch.ones_like(r)


def test_grpo_normalises_within_each_group():
    rewards, masks = _single_step([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    adv = advantages("grpo")(rewards, masks, groups, eps=0.0)
    # group 0: mean 0.5, unbiased std sqrt(1/3); group 1: all equal -> 0
    s = math.sqrt(1 / 3)
    assert torch.allclose(adv[:, 0], torch.tensor([0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, 0.0, 0.0]), atol=1e-5)


def test_grpo_without_std_normalisation_is_mean_centred_only():
    rewards, masks = _single_step([3.0, 1.0])
    adv = advantages("grpo")(rewards, masks, torch.tensor([7, 7]), norm_std=False)
    assert adv[:, 0].tolist() == [1.0, -1.0]


def test_grpo_sums_turn_rewards_and_broadcasts_to_every_turn():
    rewards = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]])
    masks = torch.tensor([[1, 1, 0], [1, 1, 1]])
    adv = advantages("grpo")(rewards, masks, torch.tensor([0, 0]), norm_std=False)
    assert adv.tolist() == [[0.5, 0.5, 0.0], [-0.5, -0.5, -0.5]]


def test_rloo_subtracts_the_mean_of_the_other_members():
    rewards, masks = _single_step([1.0, 0.0, 2.0, 5.0])
    adv = advantages("rloo")(rewards, masks, torch.tensor([0, 0, 0, 1]))
    # episode 0: 1 - (0+2)/2 = 0; episode 1: 0 - 1.5; episode 2: 2 - 0.5; lone episode: no baseline -> 0
    assert adv[:, 0].tolist() == [0.0, -1.5, 1.5, 0.0]


def test_reinforce_pp_discounts_then_whitens():
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    masks = torch.ones(2, 2)
    raw = advantages("reinforce_pp")(rewards, masks, torch.tensor([0, 0]), gamma=0.5, norm_std=False)
    # returns-to-go: [0.5, 1.0] and [0, 0]; group-mean baseline of episode returns (1 and 0) = 0.5
    assert raw.tolist() == [[0.0, 0.5], [-0.5, -0.5]]
    whitened = advantages("reinforce_pp")(rewards, masks, torch.tensor([0, 0]), gamma=0.5)
    assert abs(float(whitened.mean())) < 1e-6 and abs(float(whitened.std()) - 1.0) < 1e-4


def test_gae_over_turns_with_discount():
    # one episode, 3 turns; hand computation with gamma=0.9, lambda=0.8
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 0.6, 0.7]])
    masks = torch.ones(1, 3)
    adv = advantages("gae")(rewards, masks, torch.tensor([0]), values, gamma=0.9, lam=0.8, norm_std=False)
    d2 = 1.0 - 0.7
    d1 = 0.0 + 0.9 * 0.7 - 0.6
    d0 = 0.0 + 0.9 * 0.6 - 0.5
    a2 = d2
    a1 = d1 + 0.9 * 0.8 * a2
    a0 = d0 + 0.9 * 0.8 * a1
    assert torch.allclose(adv, torch.tensor([[a0, a1, a2]]), atol=1e-6)


def test_gae_skips_masked_steps_as_if_absent():
    # token-level: env tokens (mask 0) between two sampled tokens are not time steps
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    values = torch.tensor([[0.2, 9.0, 9.0, 0.4]])
    masks = torch.tensor([[1, 0, 0, 1]])
    adv = advantages("gae")(rewards, masks, torch.tensor([0]), values, gamma=0.5, lam=1.0, norm_std=False)
    compact = advantages("gae")(torch.tensor([[0.0, 1.0]]), torch.ones(1, 2), torch.tensor([0]),
                                torch.tensor([[0.2, 0.4]]), gamma=0.5, lam=1.0, norm_std=False)
    assert adv[0, 1] == 0 and adv[0, 2] == 0
    assert torch.allclose(adv[0, [0, 3]], compact[0], atol=1e-6)


def test_gae_needs_values():
    with pytest.raises(ValueError, match="value"):
        advantages("gae")(torch.zeros(1, 1), torch.ones(1, 1), torch.tensor([0]))


def test_steps_to_tokens_zeroes_non_action_tokens():
    per_turn = torch.tensor([[2.0, -1.0]])
    token_steps = torch.tensor([[-1, -1, 0, 0, -1, 1, -1]])
    assert steps_to_tokens(per_turn, token_steps).tolist() == [[0, 0, 2, 2, 0, -1, 0]]


def test_registry_lists_and_rejects_unknown_names():
    assert {"grpo", "rloo", "reinforce_pp", "gae"} <= set(registered_advantages())
    with pytest.raises(KeyError, match="registered: .*grpo"):
        advantages("grpoo")
    with pytest.raises(ValueError, match="already registered"):
        register_advantage("grpo")(lambda *a, **k: None)


def test_efficiency_bonus_ranks_the_successes_of_each_group_by_their_steps():
    steps = torch.tensor([1, 2, 2, 3, 1, 4, 2, 2])
    success = torch.tensor([1, 1, 0, 1, 0, 1, 1, 1], dtype=torch.bool)
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2])
    bonus = efficiency_bonus(steps, success, groups, coef=0.4)
    # group 0: successes took 1, 2, 3 steps -> +0.2, 0, -0.2; its failure 0 although it took 2 steps.
    # group 1: the 1-step episode failed (no bonus for failing fast); successes 4 and 2 steps.
    # group 2: a single success has nothing to be compared with.
    assert torch.allclose(bonus, torch.tensor([0.2, 0.0, 0.0, -0.2, 0.0, -0.2, 0.2, 0.0]))


def test_efficiency_bonus_is_zero_without_a_spread_among_successes():
    steps = torch.tensor([2, 2, 1, 3])
    success = torch.tensor([1, 1, 0, 0], dtype=torch.bool)
    assert efficiency_bonus(steps, success, torch.tensor([0, 0, 0, 0]), coef=1.0).tolist() == [0.0] * 4
    assert efficiency_bonus(steps, torch.zeros(4, dtype=torch.bool), torch.tensor([0, 0, 1, 1]), 1.0).tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="coef"):
        efficiency_bonus(steps, success, torch.tensor([0, 0, 0, 0]), coef=-0.1)


def test_efficiency_bonus_makes_an_unneeded_step_count_next_to_a_failure():
    # one success answered at once, two after an unneeded tool call (-0.05 step cost), one failure
    returns = torch.tensor([1.0, 0.95, 0.95, 0.0])
    steps = torch.tensor([1, 2, 2, 1])
    success = torch.tensor([1, 1, 1, 0], dtype=torch.bool)
    groups = torch.zeros(4, dtype=torch.long)

    def gap_ratio(coef: float) -> float:  # (short - long success) / (long success - failure), in advantages
        shaped = returns + efficiency_bonus(steps, success, groups, coef=coef)
        adv = advantages("grpo")(shaped[:, None], torch.ones(4, 1), groups)[:, 0]
        assert adv[0] > adv[1] == adv[2] > adv[3]
        return float((adv[0] - adv[1]) / (adv[1] - adv[3]))

    assert gap_ratio(0.0) == pytest.approx(0.05 / 0.95)  # the step cost alone: 5 % of a failure
    assert gap_ratio(0.4) == pytest.approx(0.45 / 0.75)   # +0.2 vs -0.2: 60 %
