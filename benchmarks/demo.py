"""The main job's wall time and learning table (``python -m agentic_rl.demo`` in-process).

Rows: demo wall time against the 10-minute goal (set-up excluded), held-out greedy success of SFT and
RL (goal: RL ≥ 90 % and ≥ 30 points above SFT), mean steps on successes SFT → RL (goal: falls; also on
the tasks both solve, where only unneeded calls can differ; and as steps beyond each solved task's
minimum), and
robustness on the perturbed env (goal ≥ 0.8).

``DEMO_JSON=runs/demo/demo.json python benchmarks/run_all.py --only demo`` records a finished
``make demo`` run instead of running the demo again (its own wall time, from its ``demo.json``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any


def rows_from(demo: dict[str, Any], seconds: float, note: str) -> list[dict]:
    """Benchmark rows from a demo's ``demo.json`` content."""
    rows = {r["stage"]: r for r in demo["rows"]}
    sft, rl = rows["SFT (greedy)"], rows["RL (greedy)"]
    teacher = next(r for stage, r in rows.items() if stage.startswith("teacher"))
    perturbation = demo["settings"]["perturbation"]
    return [
        {"name": "demo/wall_time", "value": round(seconds, 1), "baseline": 600.0, "ratio": round(seconds / 600, 3),
         "unit": "s", "goal": "ratio ≤ 1 (10 min)", "note": note},
        {"name": "demo/rl_greedy_success", "value": rl["success"], "baseline": sft["success"],
         "ratio": round(rl["success"] - sft["success"], 3), "unit": "fraction (ratio = points over SFT)",
         "goal": "≥ 0.90 and ≥ +0.30 over SFT", "note": note},
        {"name": "demo/teacher_success", "value": teacher["success"], "baseline": None, "ratio": None,
         "unit": "fraction", "note": note},
        {"name": "demo/steps_on_success", "value": rl["steps_success"], "baseline": sft["steps_success"],
         "ratio": round(rl["steps_success"] / sft["steps_success"], 3) if sft["steps_success"] else None,
         "unit": "steps", "goal": "ratio < 1", "note": note},
        *_paired_row(demo.get("paired_steps") or {}, note),
        *_unneeded_row(sft, rl, note),
        {"name": "demo/rl_robustness", "value": rl["perturbed"], "baseline": rl["success"], "ratio": rl["robustness"],
         "unit": f"success on '{perturbation}'", "goal": "ratio ≥ 0.8", "note": note},
    ]


def _paired_row(paired: dict[str, Any], note: str) -> list[dict]:
    """Steps SFT → RL on the held-out tasks both solve (same tasks, so only wasted calls can differ)."""
    if not paired.get("tasks"):
        return []
    return [{"name": "demo/steps_on_tasks_both_solve", "value": paired["rl"], "baseline": paired["sft"],
             "ratio": round(paired["rl"] / paired["sft"], 3), "unit": f"steps ({paired['tasks']} tasks)",
             "goal": "ratio < 1", "note": note}]


def _unneeded_row(sft: dict[str, Any], rl: dict[str, Any], note: str) -> list[dict]:
    """Steps beyond each solved task's minimum (its needed calls + the answer), SFT → RL (greedy)."""
    if rl.get("unneeded_steps") is None or sft.get("unneeded_steps") is None:
        return []  # a demo.json from before the column existed
    value, baseline = rl["unneeded_steps"], sft["unneeded_steps"]
    return [{"name": "demo/unneeded_steps_on_success", "value": round(value, 3), "baseline": round(baseline, 3),
             "ratio": round(value / baseline, 3) if baseline else None, "unit": "steps per success",
             "goal": "falls", "note": note}]


def command_env() -> str:
    """The environment part of the recorded command (``run_all.py`` prefixes it)."""
    return f"DEMO_JSON={os.environ['DEMO_JSON']} " if os.environ.get("DEMO_JSON") else ""


def run(quick: bool = False) -> list[dict]:
    finished = os.environ.get("DEMO_JSON")
    if finished:
        demo = json.loads(Path(finished).read_text())
        return rows_from(demo, demo["total_seconds"], f"recorded from {finished} (make demo)")
    from agentic_rl.demo import QUICK, DemoSettings, run_demo

    settings = DemoSettings(run_dir="runs/bench_demo")
    if quick:
        settings = replace(settings, quick=True, **{**QUICK, "run_dir": "runs/bench_demo_quick"})
    start = time.perf_counter()
    result = run_demo(settings)
    seconds = time.perf_counter() - start
    demo = {"settings": asdict(settings), "rows": [asdict(r) for r in result.rows], "paired_steps": result.paired_steps}
    return rows_from(demo, seconds, "quick" if quick else "full")


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
