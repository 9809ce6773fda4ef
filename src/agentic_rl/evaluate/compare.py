"""Before/after comparison of several evaluated policies on the same tasks and seeds.

The first result is the baseline. Each other policy gets its success-rate difference with a p-value:

- **paired** (the usual case: same tasks and seeds, so episodes match by ``task|seed|sample``): the
  exact McNemar test on the discordant pairs — it uses the pairing, so it detects smaller differences
  than an unpaired test on the same episodes;
- **unpaired** (no matching episodes): the pooled two-proportion z-test.

The mean-reward difference gets a 95 % paired bootstrap interval over the matched episodes. A
difference is called significant when ``p < alpha`` (default 0.05); with several policies compared to
one baseline no multiple-comparison correction is applied (the table says so).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_rl.evaluate.result import EvalResult, episode_key
from agentic_rl.evaluate.stats import mcnemar_exact, paired_bootstrap_ci, two_proportion_p

METHOD = ("success: exact McNemar test on episodes paired by task, seed and sample (two-proportion z-test when "
          "unpaired); reward: 95% paired bootstrap CI of the mean difference; significant = p < {alpha}; "
          "no multiple-comparison correction")


@dataclass
class Comparison:
    """Rows (one per policy, baseline first) plus a sentence naming the statistical method."""

    baseline: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    method: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "rows": self.rows, "method": self.method}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        if path.is_dir() or not path.suffix:
            path = path / "compare.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        return path


def compare(results: Sequence[EvalResult], alpha: float = 0.05) -> Comparison:
    """Compare each result with the first one (see the module docstring)."""
    if len(results) < 2:
        raise ValueError(f"compare needs at least two evaluated policies, got {len(results)}")
    base = results[0]
    base_by_key = {episode_key(t): t for t in base.trajectories}
    out = Comparison(baseline=base.policy, method=METHOD.format(alpha=alpha))
    out.rows.append(_row(base))
    for other in results[1:]:
        row = _row(other)
        other_by_key = {episode_key(t): t for t in other.trajectories}
        common = sorted(set(base_by_key) & set(other_by_key))
        if common:
            only_base = sum(1 for k in common if base_by_key[k].success and not other_by_key[k].success)
            only_other = sum(1 for k in common if other_by_key[k].success and not base_by_key[k].success)
            p_value = mcnemar_exact(only_base, only_other)
            diffs = [other_by_key[k].total_reward - base_by_key[k].total_reward for k in common]
            low, high = paired_bootstrap_ci(diffs)
            row.update({"paired_episodes": len(common), "wins": only_other, "losses": only_base,
                        "reward_diff_ci_low": low, "reward_diff_ci_high": high, "test": "mcnemar_exact"})
        else:
            p_value = two_proportion_p(base.clean.successes, base.clean.episodes, other.clean.successes,
                                       other.clean.episodes)
            row.update({"paired_episodes": 0, "test": "two_proportion_z"})
        row["success_diff"] = other.clean.success_rate - base.clean.success_rate
        row["reward_diff"] = other.clean.mean_reward - base.clean.mean_reward
        row["p_value"] = p_value
        row["significant"] = p_value < alpha
        out.rows.append(row)
    return out


def _row(result: EvalResult) -> dict[str, Any]:
    c = result.clean
    row: dict[str, Any] = {"policy": result.policy, "episodes": c.episodes, "success_rate": c.success_rate,
                           "success_ci_low": c.success_ci_low, "success_ci_high": c.success_ci_high,
                           "mean_reward": c.mean_reward, "mean_steps": c.mean_steps}
    for name, value in result.robustness.items():
        row[f"robustness/{name}"] = value
    return row
