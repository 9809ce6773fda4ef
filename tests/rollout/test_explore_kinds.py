"""Kind exploration: a forced opener starts the action, the policy writes the rest, the trainer learns
from the opener as from its own tokens (ratio 1)."""

from __future__ import annotations

import math

import pytest
import torch

from agentic_rl.agent.prompt import check_ledger, render_messages
from agentic_rl.algos import policy_loss
from agentic_rl.rollout import SamplingParams, load_jsonl, rollout, save_jsonl
from agentic_rl.train.batching import samples_from_trajectories
from agentic_rl.train.sampling import action_openers
from agentic_rl.train.update import policy_step

SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=12, seed=0)


def test_every_explored_turn_starts_with_its_opener_and_trains_on_it(engine, echo_env, make_tasks, tmp_path):
    trajs = rollout(engine, echo_env, make_tasks(2), group_size=2, sampling=SAMPLING, max_turns=3, explore=1.0,
                    openers=["<answer>", "<tool>"])
    seen = set()
    for traj in trajs:
        seg = traj.segments[0]
        assert len(seg.explored_spans) == traj.num_turns > 0
        for turn, (start, end) in zip(traj.turns, seg.explored_spans, strict=True):
            seen.add(turn.explored)
            assert turn.action.startswith(turn.explored) and turn.explored in ("<answer>", "<tool>")
            assert engine.format.decode(seg.token_ids[start:end]) == turn.explored
            assert seg.loss_mask[start:end] == [1] * (end - start)  # trained on ...
            assert seg.logprobs[start:end] == [0.0] * (end - start)  # ... though nothing sampled it
            assert turn.token_ids[: end - start] == seg.token_ids[start:end]
        messages = render_messages(traj.metadata["system_prompt"], [(t.observation, t.action) for t in traj.turns])
        spans = [(2 + 2 * i, start, end) for i, start, end in seg.turn_spans]
        check_ledger(engine.tokenizer, seg.token_ids, messages, spans, add_generation_prompt=False)
    assert seen == {"<answer>", "<tool>"}
    save_jsonl(trajs, tmp_path / "t.jsonl")
    assert load_jsonl(tmp_path / "t.jsonl")[0].segments[0].explored_spans == trajs[0].segments[0].explored_spans


def test_without_exploration_nothing_is_forced(engine, echo_env, make_tasks):
    trajs = rollout(engine, echo_env, make_tasks(1), group_size=2, sampling=SAMPLING, max_turns=2, explore=0.0,
                    openers=["<answer>"])
    assert all(not t.segments[0].explored_spans and not any(turn.explored for turn in t.turns) for t in trajs)
    with pytest.raises(ValueError, match="openers"):
        rollout(engine, echo_env, make_tasks(1), sampling=SAMPLING, explore=0.5)
    with pytest.raises(ValueError, match="explore"):
        rollout(engine, echo_env, make_tasks(1), sampling=SAMPLING, explore=1.5, openers=["<answer>"])


def test_explored_openers_get_the_gradient_of_ratio_one(engine, tiny_policy, echo_env, make_tasks):
    trajs = rollout(engine, echo_env, make_tasks(1), group_size=2, sampling=SAMPLING, max_turns=1, explore=1.0,
                    openers=["<answer>"])
    samples = samples_from_trajectories(trajs)
    start, end = trajs[0].segments[0].explored_spans[0]
    assert all(math.isnan(v) for v in samples[0].old_logprobs[start:end])
    for s in samples:
        s.advantages = [1.0 if m else 0.0 for m in s.loss_mask]
    kwargs = dict(loss_fn=policy_loss("ppo_clip"), loss_kwargs={"aggregation": "token_mean"}, temperature=1.0,
                  token_budget=4096, pad_token_id=0)
    params = [p for p in tiny_policy.model.parameters() if p.requires_grad]

    def grad(batch):
        tiny_policy.model.zero_grad()
        result = policy_step(tiny_policy.model, batch, **kwargs)
        return torch.cat([p.grad.flatten() for p in params]), result

    explored, result = grad(samples)
    assert torch.isfinite(explored).all() and explored.abs().sum() > 0
    assert all(math.isfinite(v) for v in result.metrics.values())
    # the same as if the rollout had recorded the current policy's own logprobs there
    from agentic_rl.models import sequence_logprobs

    for s in samples:
        with torch.no_grad():
            lp, _ = sequence_logprobs(tiny_policy.model, torch.tensor([s.token_ids]), temperature=1.0)
        s.old_logprobs = [lp[0, i].item() if math.isnan(v) else v for i, v in enumerate(s.old_logprobs)]
    recorded, _ = grad(samples)
    torch.testing.assert_close(explored, recorded, atol=1e-6, rtol=1e-4)


def test_action_openers_follow_the_env_accepted_kinds(echo_env):
    assert action_openers("tool-use-v0") == ["<tool>", "<answer>"]
    assert action_openers("", echo_env) == ["<answer>", "<tool>"]
