"""Expert-prefix guidance: re-play a group that failed completely from a state the env's expert reached.

A task that needs several steps in sequence (look a value up, *then* compute with it) gives GRPO no
signal while the policy almost never completes the whole chain: every episode of the group fails alike.
For such a group, guidance plays the first ``n`` actions of the env's scripted expert (skill 1.0) as
*forced* turns (loss mask 0) and lets the policy sample the rest, in a second group of the same size.
That group shares one start state, so its advantages compare the policy's own continuations from there:
the policy learns the later steps from its own samples and needs no demonstration at evaluation.

Only groups without a single success are re-played. Guiding groups the policy already solves would only
reward the *last* steps (the forced earlier ones carry no credit) and tilt it towards finishing early.
``n`` is drawn uniformly from ``1 .. k-1`` for an expert episode of ``k`` actions (the policy keeps at
least one); tasks the expert does not solve, or solves in one action, are not guided. The chance of
guiding decays over training like the other exploration schedules. Guided episodes carry
``metadata["guided_turns"]`` and a ``guided/`` group id; the trainer keeps them out of the curriculum.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from agentic_rl.rollout.trajectory import Trajectory
from agentic_rl.tasks.core import Task

#: ``play(tasks, seeds=..., prefixes=...)``: one group per task, a RolloutFn with its other arguments bound
PlayFn = Callable[..., list[Trajectory]]


def expert_prefixes(make_env: Callable[[], Any], tasks: Sequence[Task], seeds: Sequence[int], rng: random.Random,
                    max_steps: int = 50) -> list[list[str]]:
    """Per task: the first actions of the env's expert from ``reset(seed=seeds[i])``, or ``[]`` when the
    expert fails or needs a single action. ``make_env()`` builds one env with a scripted expert."""
    from agentic_rl.envs.experts import play_expert

    env = make_env()
    prefixes: list[list[str]] = []
    try:
        for task, seed in zip(tasks, seeds, strict=True):
            try:
                demo = play_expert(env, task, skill=1.0, seed=seed, max_steps=max_steps)
            except NotImplementedError as exc:  # the base Env's expert_action
                raise ValueError(f"expert-prefix guidance needs an env with a scripted expert ({exc}); "
                                 "set rollout.guide_failed=0") from None
            actions = [turn.action for turn in demo.turns]
            ok = demo.success and len(actions) >= 2
            prefixes.append(actions[: rng.randint(1, len(actions) - 1)] if ok else [])
    finally:
        env.close()
    return prefixes


def guided_retries(play: PlayFn, trajectories: Sequence[Trajectory], tasks: Sequence[Task], seeds: Sequence[int],
                   make_env: Callable[[], Any], probability: float, rng: random.Random) -> list[Trajectory]:
    """New guided groups for the groups of ``trajectories`` (``len(tasks)`` groups in task order, as a
    RolloutFn returns them) that have no success, each chosen with ``probability``; ``[]`` if none."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"guidance probability must be in [0, 1], got {probability}")
    size = len(trajectories) // max(1, len(tasks))
    failed = [i for i in range(len(tasks)) if not any(t.success for t in trajectories[i * size:(i + 1) * size])]
    chosen = [i for i in failed if rng.random() < probability]
    if not chosen:
        return []
    prefixes = expert_prefixes(make_env, [tasks[i] for i in chosen], [seeds[i] for i in chosen], rng)
    keep = [(i, p) for i, p in zip(chosen, prefixes, strict=True) if p]
    if not keep:
        return []
    retried = play([tasks[i] for i, _ in keep], seeds=[seeds[i] for i, _ in keep], prefixes=[p for _, p in keep])
    for traj in retried:  # group ids are per rollout call: keep them apart from the first call's
        traj.group = f"guided/{traj.group}"
    return retried


def unguided(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """The episodes the policy played from the task's own start (no forced expert prefix)."""
    return [t for t in trajectories if not t.metadata.get("guided_turns")]
