"""Policy / value losses against hand-computed values, and exact zero gradient on masked tokens."""

from __future__ import annotations

import math

import torch

from agentic_rl.algos import aggregate, explained_variance, kl_divergence, policy_loss, value_loss


def test_ppo_clip_asymmetric_range():
    old = torch.zeros(1, 3)
    logprobs = torch.log(torch.tensor([[1.5, 0.5, 1.1]]))  # ratios 1.5, 0.5, 1.1
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    mask = torch.ones(1, 3)
    loss, metrics = policy_loss("ppo_clip")(logprobs, old, adv, mask, clip_low=0.2, clip_high=0.3)
    # token 0: A>0, ratio 1.5 clipped at 1.3 -> -1.3; token 1: A<0, ratio 0.5 clipped at 0.8 -> 0.8;
    # token 2: inside the range -> -1.1
    assert math.isclose(float(loss), (-1.3 + 0.8 - 1.1) / 3, rel_tol=1e-5)
    assert math.isclose(metrics["policy/clip_frac"], 2 / 3, rel_tol=1e-5)


def test_masked_environment_tokens_get_exactly_zero_gradient():
    logprobs = torch.tensor([[-1.0, -50.0, -0.5, float("-inf")]], requires_grad=True)
    old = torch.tensor([[-1.2, 0.0, -0.4, 0.0]])
    adv = torch.tensor([[1.0, 5.0, -2.0, 3.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    entropy = torch.tensor([[1.0, 2.0, 3.0, 4.0]], requires_grad=True)
    ref = torch.tensor([[-1.1, -3.0, -0.6, -2.0]])
    for name in ("ppo_clip", "reinforce"):
        logprobs.grad = None
        loss, _ = policy_loss(name)(logprobs, old, adv, mask, ref_logprobs=ref, kl_coef=0.1, entropy=entropy,
                                    entropy_coef=0.01)
        loss.backward()
        assert torch.isfinite(loss)
        assert logprobs.grad[0, 1] == 0 and logprobs.grad[0, 3] == 0
        assert logprobs.grad[0, 0] != 0 and logprobs.grad[0, 2] != 0


def test_aggregations():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert float(aggregate(values, mask, "token_mean")) == 10 / 4
    assert float(aggregate(values, mask, "seq_mean")) == (2.0 + 4.0) / 2
    assert float(aggregate(values, mask, "seq_sum")) == (6.0 + 4.0) / 2
    assert float(aggregate(values, mask, "token_mean", normalizer=8)) == 10 / 8


def test_kl_estimators():
    lp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert math.isclose(float(kl_divergence(lp, ref, "k1")), math.log(2), rel_tol=1e-6)
    assert math.isclose(float(kl_divergence(lp, ref, "k2")), 0.5 * math.log(2) ** 2, rel_tol=1e-6)
    assert math.isclose(float(kl_divergence(lp, ref, "k3")), 0.5 + math.log(2) - 1, rel_tol=1e-6)


def test_kl_term_in_the_loss_and_entropy_bonus():
    lp = torch.tensor([[math.log(0.5)]])
    mask = torch.ones(1, 1)
    zero_adv = torch.zeros(1, 1)
    loss, metrics = policy_loss("ppo_clip")(lp, lp, zero_adv, mask, ref_logprobs=torch.tensor([[math.log(0.25)]]),
                                            kl_coef=2.0, kl_estimator="k1", entropy=torch.tensor([[3.0]]),
                                            entropy_coef=0.1)
    assert math.isclose(float(loss), 2.0 * math.log(2) - 0.3, rel_tol=1e-5)
    assert math.isclose(metrics["policy/kl"], math.log(2), rel_tol=1e-5)
    assert metrics["policy/entropy"] == 3.0


def test_value_loss_clipping():
    values = torch.tensor([[2.0, 0.0]])
    old = torch.tensor([[1.0, 0.0]])
    returns = torch.tensor([[3.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0]])
    loss, _ = value_loss(values, old, returns, mask, clip=0.5)
    # token 0: unclipped (2-3)^2 = 1, clipped value 1.5 -> (1.5-3)^2 = 2.25 -> max 2.25; token 1: 1
    assert math.isclose(float(loss), 0.5 * (2.25 + 1.0) / 2, rel_tol=1e-6)
    unclipped, _ = value_loss(values, old, returns, mask, clip=None)
    assert math.isclose(float(unclipped), 0.5 * (1.0 + 1.0) / 2, rel_tol=1e-6)


def test_explained_variance():
    returns = torch.tensor([1.0, 2.0, 3.0, 4.0])
    mask = torch.ones(4)
    assert explained_variance(returns.clone(), returns, mask) == 1.0
    assert explained_variance(torch.full((4,), 2.5), returns, mask) <= 1e-6
