"""Print the expert-skill table (success per level: expert at skill 1.0 / 0.5 / 0.0, random agent) of the
tool-use and workflow envs on their test split, as Markdown. Run: ``python docs/envs/skill_table.py``."""

from __future__ import annotations

import random

from agentic_rl.envs import tool_use, workflow


def _rates(env, policy) -> dict[int, tuple[float, int]]:
    by_level: dict[int, list[bool]] = {}
    for i, task in enumerate(env.tasks):
        env.reset(seed=i, options={"task": task})
        info: dict = {}
        for _ in range(env.max_steps):
            *_, terminated, truncated, info = env.step(policy(env))
            if terminated or truncated:
                break
        by_level.setdefault(task.difficulty, []).append(bool(info.get("success")))
    return {level: (sum(v) / len(v), len(v)) for level, v in sorted(by_level.items())}


def table(env, module, families: dict[str, int]) -> str:
    rng = random.Random(0)
    columns = [_rates(env, lambda e: e.expert_action(1.0)), _rates(env, lambda e: e.expert_action(0.5)),
               _rates(env, lambda e: e.expert_action(0.0)), _rates(env, lambda e: module.random_action(e, rng))]
    lines = ["| level | families | test tasks | expert skill 1.0 | skill 0.5 | skill 0.0 (habits only) | random agent |",
             "|---|---|---|---|---|---|---|"]
    for level in sorted(columns[0]):
        names = ", ".join(f for f, lv in families.items() if lv == level)
        cells = " | ".join(f"{c[level][0]:.0%}" for c in columns)
        lines.append(f"| {level} | {names} | {columns[0][level][1]} | {cells} |")
    return "\n".join(lines)


if __name__ == "__main__":
    from agentic_rl.envs.tool_use_tasks import LEVELS as TOOL_LEVELS
    from agentic_rl.envs.workflow_tasks import LEVELS as FLOW_LEVELS

    print("tool-use-v0 (seed 0, test split)\n")
    print(table(tool_use.ToolUseEnv(split="test"), tool_use, TOOL_LEVELS))
    print("\nworkflow-v0 (seed 0, test split)\n")
    print(table(workflow.WorkflowEnv(split="test"), workflow, FLOW_LEVELS))
