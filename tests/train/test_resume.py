"""Resume: 4 iterations in one go == 2 iterations, a crash, and 2 more after --resume."""

from __future__ import annotations

import json

import pytest
import torch
from toy import FAST, LetterEnv, letter_tasks

from agentic_rl.models.policy import Policy, load_policy
from agentic_rl.train import train_rl

SETTINGS = dict(FAST, advantage="gae", lr=0.05, iterations=4, group_size=4, tasks_per_iteration=2, eval_every=2, save_every=2, seed=3,
                replay_capacity=16, replay_coef=0.1, replay_samples=2, use_curriculum=True, curriculum_window=8)
VOLATILE = ("time", "perf/", "time/")


class Crash(Exception):
    pass


def _metrics(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rows]


def _params(path):
    return torch.cat([p.detach().flatten() for p in Policy.load(path).model.parameters()])


def test_resume_continues_exactly(tiny_model_path, tmp_path):
    common = dict(env=LetterEnv, tasks=letter_tasks(), model_name=str(tiny_model_path), **SETTINGS)
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    train_rl(policy=load_policy(str(tiny_model_path)), run_dir=str(straight), **common)

    def crash(metrics):
        if metrics["iteration"] == 3:  # iteration 3 was logged, its checkpoint never written
            raise Crash

    with pytest.raises(Crash):
        train_rl(policy=load_policy(str(tiny_model_path)), run_dir=str(broken), progress=crash, **common)
    assert json.loads((broken / "checkpoints" / "last" / "trainer_state.json").read_text())["iteration"] == 2

    result = train_rl(run_dir=str(broken), resume=True, **common)  # loads checkpoints/last itself
    assert result.iterations_done == 4
    assert _metrics(straight) == _metrics(broken)
    assert torch.equal(_params(straight / "checkpoints" / "last"), _params(broken / "checkpoints" / "last"))
    assert "resume" in [json.loads(line)["event"] for line in (broken / "events.jsonl").read_text().splitlines()]
