"""Micro-batching: token budget, ledger → samples, and gradient-accumulation invariance."""

from __future__ import annotations

import torch

from agentic_rl.algos import policy_loss
from agentic_rl.rollout.trajectory import Segment, Trajectory
from agentic_rl.train.batching import micro_batches, samples_from_trajectories
from agentic_rl.train.scoring import score
from agentic_rl.train.update import policy_step


def test_micro_batches_respect_the_token_budget_and_cover_everything():
    lengths = [5, 30, 7, 12, 12, 3, 40, 8]
    groups = micro_batches(lengths, token_budget=32)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        longest = max(lengths[i] for i in g)
        assert len(g) == 1 or longest * len(g) <= 32
    assert [6] in groups  # longer than the budget: alone


def _two_turn_trajectory() -> Trajectory:
    # prompt(3) | turn0 action(2) | env obs(3) | turn1 action(2) | glue(1)
    seg = Segment(token_ids=list(range(1, 12)), loss_mask=[0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0],
                  logprobs=[0.0] * 11, turn_spans=[(0, 3, 5), (1, 8, 10)])
    traj = Trajectory("t", turns=[], segments=[seg], group="g")
    from agentic_rl.rollout.trajectory import Turn

    traj.turns = [Turn("o0", "a0", reward=0.0), Turn("o1", "a1", reward=1.0)]
    return traj


def test_turn_advantages_land_only_on_the_policy_tokens():
    good, bad = _two_turn_trajectory(), _two_turn_trajectory()
    bad.turns[1].reward = 0.0
    samples = samples_from_trajectories([good, bad])
    score([good, bad], samples, estimator="grpo", gamma=1.0, lam=1.0, norm_std=False)
    assert samples[0].advantages == [0, 0, 0, 0.5, 0.5, 0, 0, 0, 0.5, 0.5, 0]
    assert samples[1].advantages == [0, 0, 0, -0.5, -0.5, 0, 0, 0, -0.5, -0.5, 0]


def test_efficiency_coef_scores_the_shorter_of_two_successes_higher():
    long_win, short_win = _two_turn_trajectory(), _two_turn_trajectory()
    from agentic_rl.rollout.trajectory import Turn

    short_win.turns = [Turn("o0", "a0", reward=1.0)]
    short_win.segments[0].turn_spans = [(0, 3, 5)]
    short_win.segments[0].loss_mask = [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0]
    long_win.success = short_win.success = True
    samples = samples_from_trajectories([long_win, short_win])
    plain = score([long_win, short_win], samples, estimator="grpo", gamma=1.0, lam=1.0, norm_std=False)
    assert samples[0].advantages[3] == 0.0  # equal returns: no signal
    shaped = score([long_win, short_win], samples, estimator="grpo", gamma=1.0, lam=1.0, norm_std=False,
                   efficiency_coef=0.2)
    assert plain.tolist() == [1.0, 1.0] and torch.allclose(shaped, torch.tensor([0.9, 1.1]))
    assert samples[0].advantages[3] < 0 < samples[1].advantages[3]


def test_one_batch_of_8_equals_8_micro_batches_of_1(letter_run):
    policy, rollout_fn, tasks = letter_run
    torch.manual_seed(0)
    trajs = rollout_fn(list(tasks)[:2], group_size=4, seeds=[1, 2], temperature=1.0, top_p=1.0, max_new_tokens=3,
                       greedy=False, max_turns=1, epsilon=0.0)
    for i, traj in enumerate(trajs):  # make sure every group has a learning signal
        traj.turns[0].reward = float(i % 2)
    samples = samples_from_trajectories(trajs)
    score(trajs, samples, estimator="grpo", gamma=1.0, lam=1.0, norm_std=True)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    grads = []
    for budget in (100_000, 1):  # one micro-batch of 8 sequences / eight of one
        policy.model.zero_grad()
        policy_step(policy.model, samples, loss_fn=policy_loss("ppo_clip"), loss_kwargs={"aggregation": "seq_mean"},
                    temperature=1.0, token_budget=budget, pad_token_id=0)
        grads.append(torch.cat([p.grad.flatten() for p in params]))
    assert grads[0].abs().sum() > 0
    relative = float((grads[0] - grads[1]).norm() / grads[0].norm())
    assert relative < 1e-5, relative
