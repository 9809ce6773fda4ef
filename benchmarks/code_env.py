"""Throughput of the sandboxed envs: expert episodes of code-repair-v0 and shell-v0, 1 env vs 2 concurrent.

Every ``run_tests``/``submit`` of code-repair and every shell command is a fresh sandboxed process, so
this measures what rollouts pay for isolation. Both numbers of a row come from the same process, one
right after the other; the ratio (2 envs / 1 env) shows how well sandboxed steps overlap on the cores.

Usage: ``python benchmarks/code_env.py [--quick]``
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from agentic_rl.envs.code_repair import CodeRepairEnv
from agentic_rl.envs.experts import play_expert
from agentic_rl.envs.shell import ShellEnv
from agentic_rl.sandbox import Sandbox


def _episodes(env, tasks, seed: int) -> tuple[int, int, int]:
    """Play the expert on ``tasks``; returns (steps, episodes, successes)."""
    steps = successes = 0
    for i, task in enumerate(tasks):
        traj = play_expert(env, task, skill=1.0, seed=seed + i)
        steps += len(traj.turns)
        successes += traj.success
    return steps, len(tasks), successes


def _throughput(make_env, n_envs: int, episodes_per_env: int) -> tuple[float, float, float]:
    """(steps/s, episodes/s, success rate) with ``n_envs`` envs stepping concurrently in threads."""
    envs = [make_env() for _ in range(n_envs)]
    # every env plays the same spread of tasks (a stride across kinds and levels), so the work per env
    # is the same with 1 and 2 envs
    plans = [[env.tasks[(j * 13) % len(env.tasks)] for j in range(episodes_per_env)] for env in envs]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n_envs) as pool:
        results = list(pool.map(lambda k: _episodes(envs[k], plans[k], 1000 * k), range(n_envs)))
    elapsed = time.perf_counter() - start
    for env in envs:
        env.close()
    steps = sum(r[0] for r in results)
    episodes = sum(r[1] for r in results)
    return steps / elapsed, episodes / elapsed, sum(r[2] for r in results) / episodes


def run(quick: bool = False) -> list[dict]:
    sandbox = Sandbox()
    episodes = 4 if quick else 16
    rows = []
    for env_id, make_env in (("code-repair-v0", lambda: CodeRepairEnv(sandbox=sandbox)),
                             ("shell-v0", lambda: ShellEnv(sandbox=sandbox))):
        make_env().close()  # build/validate the task set (cached) outside the timed part
        one = _throughput(make_env, 1, episodes)
        two = _throughput(make_env, 2, episodes)
        note = f"expert episodes, success {one[2]:.0%} / {two[2]:.0%}; backend {sandbox.backend}"
        rows.append({"name": f"{env_id} steps/s, 2 concurrent envs vs 1", "value": round(two[0], 2),
                     "baseline": round(one[0], 2), "ratio": round(two[0] / one[0], 2), "unit": "steps/s",
                     "note": note})
        rows.append({"name": f"{env_id} episodes/s, 2 concurrent envs vs 1", "value": round(two[1], 2),
                     "baseline": round(one[1], 2), "ratio": round(two[1] / one[1], 2), "unit": "episodes/s"})
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(f"{row['name']}: {row['value']} {row['unit']} (1 env: {row['baseline']}) ratio {row['ratio']}x"
              + (f"  [{row['note']}]" if row.get("note") else ""))
