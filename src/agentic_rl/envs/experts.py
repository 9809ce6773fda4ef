"""Playing an env's scripted expert, and exporting its episodes as demonstration trajectories."""

from __future__ import annotations

import time
from collections.abc import Iterable

from agentic_rl.env.core import Env
from agentic_rl.rollout.trajectory import Trajectory, Turn
from agentic_rl.tasks.core import Task


def play_expert(env: Env, task: Task | None = None, *, skill: float = 1.0, seed: int | None = None,
                max_steps: int = 50, env_id: str = "") -> Trajectory:
    """One episode of the env's expert (``env.expert_action(skill)``) as a text-level :class:`Trajectory`.

    The trajectory has turns (observation → action text) but no token ledger: :mod:`agentic_rl.agent`
    renders demonstrations to tokens for SFT with the policy's own tokenizer.
    """
    base = env.unwrapped if hasattr(env, "unwrapped") else env
    observation, info = env.reset(seed=seed, options={"task": task} if task is not None else None)
    traj = Trajectory(task_id=info.get("task_id"), env_id=env_id or getattr(base, "spec_id", type(base).__name__),
                      seed=seed, difficulty=task.difficulty if task else 0, metadata={"policy": f"expert(skill={skill})"})
    traj.metadata["system_prompt"] = base.system_prompt()
    terminated = truncated = False
    for _ in range(max_steps):
        start = time.perf_counter()
        action = base.expert_action(skill)
        next_obs, reward, terminated, truncated, info = env.step(action)
        traj.turns.append(Turn(observation=observation, action=action, reward=reward,
                               reward_terms=dict(info.get("reward_terms", {})), terminated=terminated,
                               truncated=truncated, info=_public(info),
                               timings={"step_s": time.perf_counter() - start}))
        observation = next_obs
        if terminated or truncated:
            break
    traj.success = bool(info.get("success", False))
    traj.termination = "success" if traj.success else ("truncated" if truncated or not terminated else "failed")
    traj.metadata["final_observation"] = observation
    return traj


def collect_demonstrations(env: Env, tasks: Iterable[Task], *, skill: float = 1.0, seed: int = 0,
                           max_steps: int = 50, env_id: str = "") -> list[Trajectory]:
    """Expert episodes over ``tasks`` (seed ``seed + i`` for the i-th), e.g. SFT data."""
    return [play_expert(env, t, skill=skill, seed=seed + i, max_steps=max_steps, env_id=env_id)
            for i, t in enumerate(tasks)]


def _public(info: dict) -> dict:
    """The JSON-friendly part of an info dict (drops large/private entries)."""
    out = {}
    for key, value in info.items():
        if key.startswith("_"):
            continue
        if isinstance(value, (str, int, float, bool)) or value is None:
            out[key] = value
        elif isinstance(value, (list, tuple, dict)):
            out[key] = value
    return out
