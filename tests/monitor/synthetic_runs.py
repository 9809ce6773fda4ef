"""Synthetic run directories for report/doctor tests, written through the real ``MetricsLogger``.

``make_run(path, **patterns)`` writes a *healthy* run (reward and success rising, entropy easing off,
small KL, rare errors, clean trajectories) and lets a test replace one aspect with a pathology.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import yaml

from agentic_rl.monitor import MetricsLogger
from agentic_rl.rollout.trajectory import Trajectory, Turn

ITERATIONS = 20


def episode(task: str, success: bool, actions: list[str] | None = None, *, reward: float | None = None,
            terms: dict[str, float] | None = None, error: str | None = None, termination: str | None = None,
            hack_flags: list[str] | None = None) -> Trajectory:
    """A small episode: tool calls, then an answer. The last turn carries the outcome term."""
    actions = actions or ['<tool>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool>',
                          "<answer>4</answer>"]
    outcome = 1.0 if success else 0.0
    turns = []
    for i, action in enumerate(actions):
        last = i == len(actions) - 1
        step_terms = dict(terms or {}) if not last else {"outcome": outcome if reward is None else reward}
        step_terms.setdefault("step_cost", -0.01)
        kind = "invalid" if error == "parse_error" else "answer" if "<answer>" in action else "tool_call"
        info = {"action_kind": kind, "success": success and last}
        if error:
            info["error"] = error
        if hack_flags:
            info["hack_flags"] = list(hack_flags)
        turns.append(Turn(observation=f"obs {i}", action=action, reward=sum(step_terms.values()),
                          reward_terms=step_terms, terminated=last, info=info))
    term = termination or ("success" if success else "failed")
    return Trajectory(task_id=task, env_id="tool-use-v0", turns=turns, success=success, termination=term, seed=0)


def _rising(i: int, rng: random.Random) -> float:
    return 0.1 + 0.7 * i / (ITERATIONS - 1) + rng.uniform(-0.02, 0.02)


def make_run(path: Path, *, reward: Callable[[int, random.Random], float] | None = None,
             heldout: Callable[[int], float] | None = None, entropy: Callable[[int], float] | None = None,
             kl: Callable[[int], float] | None = None, env_error_rate: float = 0.0,
             trajectories: Callable[[int], list[Trajectory]] | None = None,
             extra: Callable[[int], dict] | None = None, evals: bool = True, heldout_metric: bool = True) -> Path:
    """Write a run dir; each keyword replaces the healthy behaviour of one aspect."""
    rng = random.Random(0)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(yaml.safe_dump({"env": {"env_id": "tool-use-v0", "max_turns": 4},
                                                      "train": {"iterations": ITERATIONS, "lr": 1e-5}}))
    with MetricsLogger(path, tensorboard=False) as log:
        for i in range(ITERATIONS):
            r = (reward or _rising)(i, rng)
            success = min(max(r, 0.0), 1.0)
            metrics = {
                "reward/mean": r, "reward/std": 0.3, "reward/min": r - 0.5, "reward/max": r + 0.5,
                "success/train": success,
                "policy/entropy": entropy(i) if entropy else 1.2 - 0.02 * i,
                "policy/kl": kl(i) if kl else 0.01 + 0.002 * i,
                "loss/total": 0.5 - 0.01 * i, "optim/lr": 1e-5, "optim/grad_norm": 0.8,
                "rollout/turns": 2.0, "rollout/response_tokens": 40.0 + i,
                "actions/tool_call": 0.5, "actions/answer": 0.5, "curriculum/level": i // 7,
                "rollout/env_error_rate": env_error_rate, "rollout/timeout_rate": 0.0,
                "rollout/parse_error_rate": 0.02, "rollout/tool_error_rate": 0.01,
                "reward_terms/outcome": success, "reward_terms/step_cost": -0.02,
                "update/failed_group_share": 0.2,
            }
            metrics.update(extra(i) if extra else {})
            if evals and i % 4 == 3:
                rate = heldout(i) if heldout else 0.1 + 0.6 * i / ITERATIONS
                if heldout_metric:  # some trainers only write eval.jsonl
                    metrics["success/heldout"] = rate
                log.log_eval(i, {"split": "test", "perturbation": None, "success_rate": rate,
                                 "success_ci_low": max(rate - 0.1, 0), "success_ci_high": min(rate + 0.1, 1),
                                 "mean_reward": rate, "mean_steps": 2.0, "episodes": 32,
                                 "per_level": {"0": {"episodes": 16, "success_rate": rate}},
                                 "terminations": {"success": int(rate * 32), "failed": 32 - int(rate * 32)}})
            log.log(i, metrics)
            if i % 5 == 4:
                trajs = trajectories(i) if trajectories else [
                    episode(f"t{i}-{j}", success=j < 3) for j in range(4)]
                log.log_trajectories(i, trajs)
    return path
