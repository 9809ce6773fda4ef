"""Emergency stops: stop file, SIGTERM, injected NaN — each leaves a loadable checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch
from toy import FAST

from agentic_rl.algos import register_policy_loss
from agentic_rl.models.policy import Policy
from agentic_rl.train import train_rl


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def _loadable(run_dir: Path) -> torch.Tensor:
    params = torch.cat([p.detach().flatten() for p in Policy.load(run_dir / "checkpoints" / "last").model.parameters()])
    assert torch.isfinite(params).all()
    return params


def test_stop_file_finishes_the_iteration_and_saves(letter_run, tmp_path):
    policy, rollout_fn, tasks = letter_run

    def touch_stop(metrics):
        if metrics["iteration"] == 1:
            (tmp_path / "STOP").write_text("")

    result = train_rl(policy=policy, rollout_fn=rollout_fn, tasks=tasks, run_dir=str(tmp_path), iterations=50,
                      lr=0.01, save_every=100, eval_every=0, progress=touch_stop, **FAST)
    assert result.stop_reason == "stop_file" and result.iterations_done == 2
    state = json.loads((tmp_path / "checkpoints" / "last" / "trainer_state.json").read_text())
    assert state["iteration"] == 2
    _loadable(tmp_path)
    assert any(e["event"] == "stop" and e["reason"] == "stop_file" for e in _events(tmp_path))


@register_policy_loss("nan_for_tests", override=True)
def _nan_loss(logprobs, old_logprobs, advantages, mask, **kwargs):
    return (logprobs * float("nan")).sum(), {}


def test_nan_loss_halts_before_the_update_and_keeps_the_good_weights(letter_run, tmp_path):
    policy, rollout_fn, tasks = letter_run
    before = torch.cat([p.detach().flatten().clone() for p in policy.model.parameters()])
    result = train_rl(policy=policy, rollout_fn=rollout_fn, tasks=tasks, run_dir=str(tmp_path), iterations=5,
                      lr=0.01, loss="nan_for_tests", eval_every=0, **FAST)
    assert result.stop_reason == "guard:non_finite_loss"
    assert torch.equal(_loadable(tmp_path), before)
    assert any(e["event"] == "guard_trip" and e["reason"] == "non_finite_loss" for e in _events(tmp_path))


def test_sigterm_in_a_subprocess_saves_and_exits_cleanly(tiny_model_path, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys, warnings
        warnings.simplefilter("ignore")
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from toy import FAST
        from toy import letter_tasks, make_rollout_fn
        from agentic_rl.models.policy import load_policy
        from agentic_rl.train import train_rl
        policy = load_policy({str(tiny_model_path)!r})
        result = train_rl(policy=policy, rollout_fn=make_rollout_fn(policy), tasks=letter_tasks(),
                          run_dir={str(tmp_path / "run")!r}, iterations=100000, lr=0.01, eval_every=0,
                          save_every=100000, **FAST)
        print("STOPPED", result.stop_reason, result.iterations_done)
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[0]
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, output
    assert "STOPPED signal:SIGTERM" in output
    _loadable(tmp_path / "run")
    assert any(e["event"] == "stop" and e["reason"] == "signal:SIGTERM" for e in _events(tmp_path / "run"))
