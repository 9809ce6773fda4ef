"""Evaluation results: per-condition summaries (success with a Wilson CI, reward, steps, pass@k, levels).

An :class:`EvalResult` holds the clean condition and every perturbation, plus the failure analysis and
the hacking audit of the clean episodes. ``rows()`` gives the ``eval.jsonl`` rows of the run-directory
layout (one per condition; ``perturbation`` is ``None`` for the clean one).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentic_rl.evaluate.audit import AuditReport
from agentic_rl.evaluate.failures import FailureReport
from agentic_rl.evaluate.stats import mean, pass_at_k, wilson_interval

if TYPE_CHECKING:
    from agentic_rl.rollout.trajectory import Trajectory


@dataclass
class EvalSummary:
    """Numbers for one condition. Means over an empty set are ``nan`` (shown as "–"), never 0."""

    episodes: int
    successes: int
    success_rate: float
    success_ci_low: float
    success_ci_high: float
    mean_reward: float
    mean_steps: float
    mean_steps_success: float
    pass_at_k: dict[str, float] = field(default_factory=dict)  # {"pass@1": ..., "pass@4": ...}
    terminations: dict[str, int] = field(default_factory=dict)
    per_level: dict[str, dict[str, float]] = field(default_factory=dict)  # level (str) -> numbers


def episode_key(traj: Trajectory) -> str:
    """``task_id|seed|sample``: the identity of an episode across policies (for paired comparisons)."""
    key = traj.metadata.get("eval_key") if traj.metadata else None
    return str(key) if key else f"{traj.task_id}|{traj.seed}|0"


def summarize(trajs: Sequence[Trajectory], samples_k: int = 1) -> EvalSummary:
    """Summarise one condition's episodes. pass@k is computed per (task, seed) problem with
    ``samples_k`` samples each, for k in 1, 2, 4, ... up to ``samples_k``, and averaged over problems."""
    n = len(trajs)
    successes = sum(bool(t.success) for t in trajs)
    low, high = wilson_interval(successes, n)
    summary = EvalSummary(
        episodes=n, successes=successes, success_rate=successes / n if n else float("nan"),
        success_ci_low=low, success_ci_high=high,
        mean_reward=mean([t.total_reward for t in trajs]),
        mean_steps=mean([t.num_turns for t in trajs]),
        mean_steps_success=mean([t.num_turns for t in trajs if t.success]),
        terminations=dict(sorted(Counter(t.termination for t in trajs).items())),
    )
    summary.pass_at_k = _pass_at_k(trajs, samples_k)
    by_level: dict[int, list[Trajectory]] = defaultdict(list)
    for traj in trajs:
        by_level[int(traj.difficulty)].append(traj)
    for level, group in sorted(by_level.items()):
        wins = sum(bool(t.success) for t in group)
        lo, hi = wilson_interval(wins, len(group))
        summary.per_level[str(level)] = {"episodes": len(group), "success_rate": wins / len(group),
                                         "success_ci_low": lo, "success_ci_high": hi,
                                         "mean_reward": mean([t.total_reward for t in group])}
    return summary


def _pass_at_k(trajs: Sequence[Trajectory], samples_k: int) -> dict[str, float]:
    problems: dict[str, list[bool]] = defaultdict(list)
    for traj in trajs:
        problem = episode_key(traj).rsplit("|", 1)[0]
        problems[problem].append(bool(traj.success))
    if not problems:
        return {}
    out: dict[str, float] = {}
    ks = sorted({1, max(samples_k, 1)} | {2**i for i in range(1, 16) if 2**i <= samples_k})
    for k in ks:
        values = [pass_at_k(len(v), sum(v), k) for v in problems.values() if len(v) >= k]
        if values:
            out[f"pass@{k}"] = sum(values) / len(values)
    return out


@dataclass
class EvalResult:
    """A policy evaluated on one env split: clean + perturbed conditions, failures and audit."""

    policy: str
    env_id: str
    split: str
    seeds: list[int]
    samples_k: int
    greedy: bool
    clean: EvalSummary
    perturbed: dict[str, EvalSummary] = field(default_factory=dict)
    robustness: dict[str, float] = field(default_factory=dict)  # perturbed success / clean success
    failures: FailureReport = field(default_factory=FailureReport)
    audit: AuditReport = field(default_factory=AuditReport)
    trajectories: list[Trajectory] = field(default_factory=list)
    perturbed_trajectories: dict[str, list[Trajectory]] = field(default_factory=dict)

    def rows(self, iteration: int | None = None) -> list[dict[str, Any]]:
        """``eval.jsonl`` rows: one per condition, with the field names of the run-directory layout."""
        out = []
        for name, summary in [(None, self.clean), *self.perturbed.items()]:
            row: dict[str, Any] = {"iteration": iteration, "split": self.split, "perturbation": name,
                                   "policy": self.policy, "env_id": self.env_id}
            flat = asdict(summary)
            row.update({k: flat[k] for k in ("success_rate", "success_ci_low", "success_ci_high", "mean_reward",
                                             "mean_steps", "mean_steps_success", "episodes", "successes")})
            row.update(summary.pass_at_k)
            row["terminations"] = summary.terminations
            row["per_level"] = summary.per_level
            if name is not None:
                row["robustness"] = self.robustness.get(name)
            else:
                row["failures"] = dict(self.failures.counts)
                row["audit_flags"] = self.audit.counts()
            out.append(row)
        return out

    def to_dict(self, with_trajectories: bool = False) -> dict[str, Any]:
        out = {
            "policy": self.policy, "env_id": self.env_id, "split": self.split, "seeds": self.seeds,
            "samples_k": self.samples_k, "greedy": self.greedy, "clean": asdict(self.clean),
            "perturbed": {k: asdict(v) for k, v in self.perturbed.items()}, "robustness": dict(self.robustness),
            "failures": self.failures.to_dict(with_examples=True), "audit": self.audit.to_dict(),
        }
        if with_trajectories:
            out["trajectories"] = [t.to_dict() for t in self.trajectories]
        return _finite(out)

    def save(self, out_dir: str | Path) -> Path:
        """Write ``result.json``, ``eval.jsonl`` (its rows) and ``trajectories.jsonl`` into ``out_dir``."""
        from agentic_rl.rollout.trajectory import save_jsonl

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False), encoding="utf-8")
        with (out / "eval.jsonl").open("w", encoding="utf-8") as fh:
            for row in self.rows():
                fh.write(json.dumps(_finite(row), ensure_ascii=False) + "\n")
        save_jsonl(self.trajectories + [t for ts in self.perturbed_trajectories.values() for t in ts],
                   out / "trajectories.jsonl")
        return out


def _finite(value: Any) -> Any:
    """Replace NaN/inf by ``None`` recursively (strict JSON)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
