"""Resume: 4 iterations in one go == 2 iterations, a crash, and 2 more after --resume."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FAST

from agentic_rl.models.policy import Policy
from agentic_rl.train import train_rl

SETTINGS = dict(FAST, advantage="gae", lr=0.05, iterations=4, eval_every=2, save_every=2, seed=3,
                replay_capacity=16, replay_coef=0.1, replay_samples=2, use_curriculum=True, curriculum_window=8)
VOLATILE = ("time", "perf/", "time/")


class Crash(Exception):
    pass


def _metrics(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rows]


def _params(path):
    model = Policy.load(path).model
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_resume_continues_exactly(tiny_model_path, tmp_path):
    from toy import letter_tasks, make_rollout_fn

    from agentic_rl.models.policy import load_policy

    def run(run_dir, **extra):
        policy = load_policy(str(tiny_model_path))
        # a resumed run loads the checkpoint itself; its rollout function must use that policy
        holder = {"fn": make_rollout_fn(policy)}

        def rollout_fn(*args, **kwargs):
            return holder["fn"](*args, **kwargs)

        return policy, holder, rollout_fn

    straight = tmp_path / "straight"
    policy, _, fn = run(straight)
    train_rl(policy=policy, rollout_fn=fn, tasks=letter_tasks(), run_dir=str(straight), model_name=str(tiny_model_path),
             **SETTINGS)

    broken = tmp_path / "broken"
    policy, _, fn = run(broken)

    def crash_after_checkpoint(metrics):
        if metrics["iteration"] == 3:  # iteration 3 was logged but its checkpoint never written
            raise Crash

    with pytest.raises(Crash):
        train_rl(policy=policy, rollout_fn=fn, tasks=letter_tasks(), run_dir=str(broken), model_name=str(tiny_model_path),
                 progress=crash_after_checkpoint, **dict(SETTINGS, save_every=2, eval_every=2))
    assert json.loads((broken / "checkpoints" / "last" / "trainer_state.json").read_text())["iteration"] == 2

    import agentic_rl.train.rl as rl_module

    original = rl_module.build_policy

    def build_and_bind(*args, **kwargs):  # bind the stub rollout to the policy loaded from the checkpoint
        loaded = original(*args, **kwargs)
        holder["fn"] = make_rollout_fn(loaded)
        return loaded

    _, holder, fn = run(broken)
    rl_module.build_policy = build_and_bind
    try:
        result = train_rl(rollout_fn=fn, tasks=letter_tasks(), run_dir=str(broken), model_name=str(tiny_model_path),
                          resume=True, **SETTINGS)
    finally:
        rl_module.build_policy = original
    assert result.iterations_done == 4
    assert _metrics(straight) == _metrics(broken)
    assert torch.equal(_params(straight / "checkpoints" / "last"), _params(broken / "checkpoints" / "last"))
    events = [json.loads(line)["event"] for line in (broken / "events.jsonl").read_text().splitlines()]
    assert "resume" in events
