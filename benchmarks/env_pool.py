"""EnvPool scaling: steps/s of a CPU-bound toy env with 1 vs 2 workers, per backend.

Run: ``.venv/bin/python benchmarks/env_pool.py [--quick]``. The env is
:class:`agentic_rl.env.toys.BusyEnv` (each step ≈ 20 ms of pure-Python arithmetic on this machine's
CPU, so the pool's own overhead is small next to it). Every figure is measured in this one process:

- ``process``: 4 slots on 1 worker process vs on 2 (two slots per worker keep each one busy).
- ``ray``: 1 env (= 1 actor) vs 2 envs (= 2 actors), on a local Ray with 2 CPUs.
- ``thread``: 1 vs 2 slots: pure-Python steps hold the GIL, so threads should *not* scale (ratio ≈ 1).
- ``overhead``: 1 process worker vs stepping the same env directly in this process.

Goal: ratio ≥ 1.8 for ``process`` and ``ray`` on 2 free cores. On a busy machine the ratio falls
with the cores other processes take; the row's note gives the load average during the run.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from agentic_rl.env.pool import EnvPool
from agentic_rl.env.toys import BusyEnv

WORK = 160_000  # BusyEnv iterations per step
ACTION = "<answer>go</answer>"


def _direct_steps_per_s(seconds: float) -> float:
    env = BusyEnv(work=WORK, episode_steps=10**9)
    env.reset(seed=0)
    env.step(ACTION)  # warm-up
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(ACTION)
        steps += 1
    return steps / (time.perf_counter() - start)


def _open(backend: str, num_envs: int, **pool_kwargs) -> EnvPool:
    pool = EnvPool(BusyEnv, num_envs, backend=backend, env_kwargs={"work": WORK, "episode_steps": 10**9},
                   **pool_kwargs)
    for slot in range(num_envs):
        pool.submit_reset(slot, seed=slot)
    _measure(pool, 0.5)  # warm-up: every worker started and busy
    return pool


def _measure(pool: EnvPool, seconds: float) -> float:
    """Keep every slot busy (resubmit as soon as a record comes back); steps per second."""
    steps, start = 0, time.perf_counter()
    while True:
        for record in pool.results(timeout=30):
            assert record.error is None, record.error
            if record.kind == "step":
                steps += 1
            pool.submit_step(record.slot, ACTION)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return steps / elapsed


def _compare(baseline_pool: EnvPool, pool: EnvPool, seconds: float, rounds: int = 3) -> tuple[float, float]:
    """Median steps/s of each pool, measured in alternating rounds so that changes in machine load
    hit both alike. Leaves both pools open."""
    base, other = [], []
    for _ in range(rounds):
        base.append(_measure(baseline_pool, seconds / rounds))
        other.append(_measure(pool, seconds / rounds))
    return statistics.median(other), statistics.median(base)


def _row(name: str, value: float, baseline: float, goal: str | None, note: str) -> dict:
    return {"name": name, "value": round(value, 1), "baseline": round(baseline, 1),
            "ratio": round(value / baseline, 2), "unit": "steps/s", "goal": goal, "note": note}


def run(quick: bool = False) -> list[dict]:
    """Benchmark rows: {"name", "value", "baseline", "ratio", "unit", "goal", "note"}."""
    seconds = 3.0 if quick else 9.0
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at start"
    rows = []
    with _open("process", 4, num_workers=1) as one, _open("process", 4, num_workers=2) as two:
        rows.append(_row("env_pool/process_2_vs_1_workers", *_compare(one, two, seconds), ">= 1.8", load))
        direct = _direct_steps_per_s(seconds / 3)
        rows.append(_row("env_pool/process_1_worker_vs_direct", _measure(one, seconds / 3), direct, ">= 0.9",
                         "pool overhead: 1 worker process vs calling env.step() in this process"))
    with _open("thread", 1) as one, _open("thread", 2) as two:
        rows.append(_row("env_pool/thread_2_vs_1_slots", *_compare(one, two, seconds), None,
                         "GIL-bound: threads do not speed up pure-Python steps; use process or ray"))
    try:
        import ray
    except ImportError:
        return rows
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with _open("ray", 1) as one, _open("ray", 2) as two:
            rows.append(_row("env_pool/ray_2_vs_1_actors", *_compare(one, two, seconds), ">= 1.8", load))
    finally:
        ray.shutdown()
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(f"{row['name']}: {row['value']} {row['unit']} vs {row['baseline']} -> x{row['ratio']}"
              f" (goal {row['goal']}; {row['note']})")
