"""EnvPool scaling: steps/s of a CPU-bound toy env with 1 vs 2 workers, per backend.

Run: ``.venv/bin/python benchmarks/env_pool.py [--quick]``. The env is
:class:`agentic_rl.env.toys.BusyEnv` (each step ≈ 20 ms of pure-Python arithmetic on this machine's
CPU, so the pool's own overhead is small next to it). Every figure is measured in this one process:

- ``bare_processes``: 1 vs 2 plain processes stepping an env with no pool: the scaling the machine
  allows at that moment (other users' load included), i.e. the ceiling for the pool rows.
- ``process``: 4 slots on 1 worker process vs on 2 (two slots per worker keep each one busy).
- ``ray``: 1 env (= 1 actor) vs 2 envs (= 2 actors), on a local Ray with 2 CPUs.
- ``thread``: 1 vs 2 slots: pure-Python steps hold the GIL, so threads should *not* scale (ratio ≈ 1).
- ``overhead``: 1 process worker vs stepping the same env directly in this process.

Goal: ratio ≥ 1.8 for ``process`` and ``ray`` on 2 free cores. On a busy machine the ratio falls
with the cores other processes take; the row's note gives the load average during the run. Where the
kernel's autogroup scheduling is on (Linux desktops and shared boxes), all processes of one session
share one fair CPU share, so with other sessions busy the ``bare_processes`` ceiling drops toward 1.0;
Ray starts its workers in their own session, which escapes that share — compare its ratio with care.
"""

from __future__ import annotations

import multiprocessing
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


def _bare_loop(results, seconds: float) -> None:
    env = BusyEnv(work=WORK, episode_steps=10**9)
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(ACTION)
        steps += 1
    results.put(steps / (time.perf_counter() - start))


def _bare_processes(count: int, seconds: float) -> float:
    """Total steps/s of ``count`` plain processes stepping their own env: no pool, no messages. The
    2-vs-1 ratio of this is the ceiling the machine allows right now (other load included)."""
    # fork: the target lives in this file, which run_all.py loads under a name a fresh process cannot
    # import; measured first, before this process has started any threads.
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_bare_loop, args=(results, seconds)) for _ in range(count)]
    for proc in procs:
        proc.start()
    total = sum(results.get(timeout=60 + seconds) for _ in procs)
    for proc in procs:
        proc.join()
    return total


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


def _autogroup_note() -> str:
    try:
        enabled = open("/proc/sys/kernel/sched_autogroup_enabled").read().strip() == "1"
    except OSError:
        return ""
    # With autogroup, each terminal session gets one fair share of the CPUs: on a machine other
    # sessions keep busy, two workers of one session share that one share (see bare_processes).
    return "; kernel autogroup on: this session's processes share one CPU share" if enabled else ""


def _row(name: str, value: float, baseline: float, goal: str | None, note: str) -> dict:
    return {"name": name, "value": round(value, 1), "baseline": round(baseline, 1),
            "ratio": round(value / baseline, 2), "unit": "steps/s", "goal": goal, "note": note}


def run(quick: bool = False) -> list[dict]:
    """Benchmark rows: {"name", "value", "baseline", "ratio", "unit", "goal", "note"}."""
    seconds = 3.0 if quick else 9.0
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at start" + _autogroup_note()
    rows = []
    bare = [(_bare_processes(1, seconds / 6), _bare_processes(2, seconds / 6)) for _ in range(3)]
    rows.append(_row("env_pool/bare_processes_2_vs_1", statistics.median(b for _, b in bare),
                     statistics.median(a for a, _ in bare), None,
                     "no pool: the scaling this machine allowed during the run (the ceiling for the rows below)"))
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
