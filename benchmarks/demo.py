"""The main job's wall time and learning table (``python -m agentic_rl.demo`` in-process).

Rows: demo wall time against the 10-minute goal (set-up excluded), held-out greedy success of SFT and
RL (goal: RL ≥ 90 % and ≥ 30 points above SFT), mean steps on successes SFT → RL (goal: falls), and
robustness on the perturbed env (goal ≥ 0.8).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace


def run(quick: bool = False) -> list[dict]:
    from agentic_rl.demo import QUICK, DemoSettings, run_demo

    settings = DemoSettings(run_dir="runs/bench_demo")
    if quick:
        settings = replace(settings, quick=True, **{**QUICK, "run_dir": "runs/bench_demo_quick"})
    start = time.perf_counter()
    result = run_demo(settings)
    seconds = time.perf_counter() - start
    sft, rl = result.row("SFT (greedy)"), result.row("RL (greedy)")
    teacher = next(r for r in result.rows if r.stage.startswith("teacher"))
    return [
        {"name": "demo/wall_time", "value": round(seconds, 1), "baseline": 600.0, "ratio": round(seconds / 600, 3),
         "unit": "s", "goal": "ratio ≤ 1 (10 min)", "note": "quick" if quick else "full"},
        {"name": "demo/rl_greedy_success", "value": rl.success, "baseline": sft.success,
         "ratio": round(rl.success - sft.success, 3), "unit": "fraction (ratio = points over SFT)",
         "goal": "≥ 0.90 and ≥ +0.30 over SFT"},
        {"name": "demo/teacher_success", "value": teacher.success, "baseline": None, "ratio": None,
         "unit": "fraction"},
        {"name": "demo/steps_on_success", "value": rl.steps_success, "baseline": sft.steps_success,
         "ratio": round(rl.steps_success / sft.steps_success, 3) if sft.steps_success else None,
         "unit": "steps", "goal": "ratio < 1"},
        {"name": "demo/rl_robustness", "value": rl.perturbed, "baseline": rl.success, "ratio": rl.robustness,
         "unit": f"success on '{settings.perturbation}'", "goal": "ratio ≥ 0.8"},
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
