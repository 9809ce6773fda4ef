"""Plain-text tables of evaluation results and comparisons (what ``agentic-rl eval`` prints)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agentic_rl.evaluate.compare import Comparison
from agentic_rl.evaluate.failures import DESCRIPTIONS
from agentic_rl.evaluate.result import EvalResult, EvalSummary


def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def grid(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A fixed-width text table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)) for row in rows]
    return "\n".join(out)


def _summary_row(name: str, s: EvalSummary, robustness: float | None = None) -> list[str]:
    return [name, str(s.episodes), _f(s.success_rate), f"[{_f(s.success_ci_low)}, {_f(s.success_ci_high)}]",
            _f(s.mean_reward), _f(s.mean_steps, 2), _f(s.mean_steps_success, 2),
            " ".join(f"{k}={_f(v)}" for k, v in s.pass_at_k.items()),
            _f(robustness) if robustness is not None else ""]


def format_result(result: EvalResult) -> str:
    """Conditions, per-level success, terminations, failure categories and audit flags as text."""
    header = ["condition", "episodes", "success", "95% CI (Wilson)", "reward", "steps", "steps|success", "pass@k",
              "robustness"]
    rows = [_summary_row("clean", result.clean)]
    rows += [_summary_row(name, s, result.robustness.get(name)) for name, s in result.perturbed.items()]
    parts = [f"{result.policy} on {result.env_id} [{result.split}] seeds={result.seeds} k={result.samples_k} "
             f"{'greedy' if result.greedy else 'sampled'}", grid(rows, header)]
    levels = [[lvl, str(int(v["episodes"])), _f(v["success_rate"]), f"[{_f(v['success_ci_low'])}, "
               f"{_f(v['success_ci_high'])}]", _f(v["mean_reward"])] for lvl, v in result.clean.per_level.items()]
    if levels:
        parts.append(grid(levels, ["level", "episodes", "success", "95% CI", "reward"]))
    parts.append("terminations: " + ", ".join(f"{k}={v}" for k, v in result.clean.terminations.items()))
    if result.failures.failed:
        parts.append(grid([[r["category"], DESCRIPTIONS[r["category"]], str(r["count"]), _f(r["share"], 2)]
                           for r in result.failures.table()], ["failure", "meaning", "count", "share"]))
    counts = result.audit.counts()
    parts.append("hacking audit: " + (", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no flags"))
    return "\n\n".join(parts)


def format_comparison(comparison: Comparison) -> str:
    header = ["policy", "episodes", "success", "95% CI", "Δ success", "p-value", "significant", "reward",
              "Δ reward [95% CI]"]
    rows = []
    for row in comparison.rows:
        delta = "" if "success_diff" not in row else f"{row['success_diff']:+.3f}"
        reward_delta = ""
        if "reward_diff" in row:
            reward_delta = f"{row['reward_diff']:+.3f}"
            if "reward_diff_ci_low" in row:
                reward_delta += f" [{row['reward_diff_ci_low']:+.3f}, {row['reward_diff_ci_high']:+.3f}]"
        rows.append([row["policy"], str(row["episodes"]), _f(row["success_rate"]),
                     f"[{_f(row['success_ci_low'])}, {_f(row['success_ci_high'])}]", delta,
                     _f(row.get("p_value"), 4) if "p_value" in row else "(baseline)",
                     _f(row.get("significant")) if "significant" in row else "", _f(row["mean_reward"]), reward_delta])
    return grid(rows, header) + f"\n\nmethod: {comparison.method}"
