"""The embedded SmolLM2-135M plays a few tool-use episodes through the real engine and env pool."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models import load_policy, sequence_logprobs
from agentic_rl.rollout import RolloutEngine, SamplingParams, rollout

pytestmark = pytest.mark.slow


def test_smollm2_plays_tool_use_episodes():
    from agentic_rl.envs.tool_use_tasks import generate_tasks

    policy = load_policy("smollm2-135m")
    engine = RolloutEngine(policy, max_context=1024, max_batch=8)
    tasks = list(generate_tasks(seed=0, n_per_family=4).split("train"))[:3]
    sampling = SamplingParams(temperature=0.8, max_new_tokens=40, seed=0)
    trajs = rollout(engine, "tool-use-v0", tasks, group_size=2, sampling=sampling, max_turns=2)
    assert len(trajs) == 6
    for traj in trajs:
        assert traj.termination in {"success", "failed", "truncated"}
        assert traj.env_id == "tool-use-v0" and traj.num_turns >= 1
        assert "calculator" in traj.metadata["system_prompt"]
        assert traj.num_sampled_tokens == sum(len(t.token_ids) for t in traj.turns)
    seg = trajs[0].segments[0]
    mask = torch.tensor([seg.loss_mask])
    with torch.no_grad():
        logprobs, _ = sequence_logprobs(policy.model, torch.tensor([seg.token_ids]), temperature=0.8,
                                        positions_mask=mask, with_entropy=False)
    expected = torch.tensor([lp for lp, m in zip(seg.logprobs, seg.loss_mask, strict=True) if m])
    torch.testing.assert_close(logprobs[0][mask[0].bool()], expected, atol=1e-3, rtol=1e-3)
