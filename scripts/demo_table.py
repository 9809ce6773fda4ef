"""Render a demo run's ``demo.json`` as the Markdown table the README shows.

Usage: ``python scripts/demo_table.py RUN_DIR/demo.json [--readme README.md]`` — with ``--readme`` the
table replaces the block between the ``DEMO-TABLE`` markers.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from agentic_rl.demo import num, pct


def render(demo: dict) -> str:
    s = demo["settings"]
    lines = [
        f"Measured {demo.get('date', '')} on 2 CPU cores with `make demo` ({demo['total_seconds']:.0f} s, set-up "
        f"excluded): {len(s['families'])} families × {s['test_tasks_per_family']} held-out tasks, teacher skill "
        f"{s['teacher_skill']}, {s['demos']} demonstrations, {s['rl_iterations']} GRPO iterations of "
        f"{s['tasks_per_iteration']}×{s['group_size']} episodes.",
        "",
        f"| policy | success | 95% CI | mean steps | steps on successes | unneeded steps on successes | mean reward "
        f"| success ({s['perturbation']}) | robustness |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in demo["rows"]:
        lines.append(f"| {r['stage']} | {pct(r['success'])} | {pct(r['ci'][0])}–{pct(r['ci'][1])} | "
                     f"{num(r['mean_steps'])} | {num(r['steps_success'])} | {num(r.get('unneeded_steps'))} | "
                     f"{num(r['mean_reward'])} | "
                     f"{pct(r['perturbed'])} | {num(r['robustness'])} |")
    families = s["families"]
    if any(r.get("by_family") for r in demo["rows"]):
        lines += ["", "Held-out success per task family (" + ", ".join(
                  f"`{f}`: {_NEEDS.get(f, 'see docs/envs/tool_use.md')}" for f in families) + "):", "",
                  "| policy | " + " | ".join(families) + " |", "|---|" + "---|" * len(families)]
        for r in demo["rows"]:
            by_family = r.get("by_family") or {}
            lines.append(f"| {r['stage']} | " + " | ".join(pct(by_family.get(f)) for f in families) + " |")
    paired = demo.get("paired_steps") or {}
    if paired.get("tasks"):
        lines += ["", f"On the {paired['tasks']} held-out tasks both SFT and RL (greedy) solve, steps per episode: "
                  f"SFT {num(paired['sft'])} → RL {num(paired['rl'])}."]
    return "\n".join(lines)


#: what each family needs, for the table's caption
_NEEDS = {"direct": "no tool (the answer is in the question)", "calc": "calculator", "convert": "convert",
          "lookup": "lookup", "lookup_calc": "lookup, then calculator", "compare": "a lookup per entity"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_json")
    parser.add_argument("--readme", default=None)
    args = parser.parse_args()
    demo = json.loads(Path(args.demo_json).read_text())
    table = render(demo)
    if args.readme:
        path = Path(args.readme)
        text = path.read_text()
        block = f"<!-- DEMO-TABLE -->\n{table}\n<!-- /DEMO-TABLE -->"
        pattern = re.compile(r"<!-- DEMO-TABLE -->.*?(<!-- /DEMO-TABLE -->|$)", re.S)
        text = pattern.sub(lambda _: block, text, count=1) if "<!-- /DEMO-TABLE -->" in text else \
            text.replace("<!-- DEMO-TABLE -->", block)
        path.write_text(text)
    print(table)


if __name__ == "__main__":
    main()
