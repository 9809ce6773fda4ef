"""How the trainer gets episodes: a ``RolloutFn`` (the rollout engine by default), and held-out evaluation.

A ``RolloutFn`` is any callable::

    rollout_fn(tasks, *, group_size, seeds, temperature, top_p, max_new_tokens, greedy, max_turns, epsilon
               [, prefixes])
        -> list[Trajectory]          # len(tasks) * group_size episodes, each with its token ledger

``prefixes`` (actions forced at the start of each task's episodes) is passed only when expert-prefix
guidance is on (``rollout.guide_failed > 0``), so a custom function needs it only to support that.

``seeds[i]`` seeds the env episodes of ``tasks[i]``. Episodes of the same task in one call share a
``group`` id. The trainer builds one with :func:`engine_rollout_fn`; tests and custom drivers can pass
their own to :func:`agentic_rl.train.train_rl`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agentic_rl.rollout.trajectory import Trajectory
from agentic_rl.tasks.core import Task


class RolloutFn(Protocol):
    def __call__(self, tasks: Sequence[Task], *, group_size: int, seeds: Sequence[int], temperature: float,
                 top_p: float, max_new_tokens: int, greedy: bool, max_turns: int,
                 epsilon: float, prefixes: Sequence[Sequence[str]] | None = None, explore: float = 0.0,
                 openers: Sequence[str] = ()) -> list[Trajectory]: ...


def engine_rollout_fn(policy: Any, env: Any, env_kwargs: dict[str, Any] | None = None, *, max_batch: int = 64,
                      max_context: int = 2048, memory_budget: int | None = None) -> RolloutFn:
    """A :class:`RolloutFn` playing ``env`` (an env id or a factory) with the batched rollout engine.

    ``max_batch`` rows decode at once: an iteration's episodes (tasks × group size) in one wave rather
    than two (48 episodes: ≈ 15 % faster at 64 rows than at 32). Each call reseeds the engine's sampler
    from ``seeds[0]`` so that a resumed run samples exactly what the uninterrupted run would have.
    """
    from agentic_rl.rollout import RolloutEngine, SamplingParams, rollout

    engine: list[Any] = []  # at most one

    def run(tasks: Sequence[Task], *, group_size: int, seeds: Sequence[int], temperature: float, top_p: float,
            max_new_tokens: int, greedy: bool, max_turns: int, epsilon: float,
            prefixes: Sequence[Sequence[str]] | None = None, explore: float = 0.0,
            openers: Sequence[str] = ()) -> list[Trajectory]:
        # One engine (one fused weight copy, one KV cache) serves training and evaluation rollouts alike:
        # episodes beyond its rows wait for free ones. It is rebuilt only if a group needs more rows.
        if not engine or engine[0].max_batch < group_size:
            engine[:] = [RolloutEngine(policy, max_context=max_context, max_batch=max(group_size, max_batch))]
        sampling = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                  greedy=greedy, seed=int(seeds[0]) if seeds else None)
        return rollout(engine[0], env, list(tasks), group_size=group_size, seeds=list(seeds), sampling=sampling,
                       max_turns=max_turns, epsilon=epsilon, env_kwargs=env_kwargs, memory_budget=memory_budget,
                       prefixes=prefixes, explore=explore, openers=openers)

    return run


def action_openers(env_id: str, env: Callable[[], Any] | None = None) -> list[str]:
    """The texts that open each kind of action the env accepts (for kind exploration): from the
    registered ``env_id``'s class, or from one env built by the factory ``env``."""
    from agentic_rl.agent.actions import ACTION_KINDS, OPENERS

    if env is not None:
        probe = env()
        try:
            kinds = getattr(probe.unwrapped if hasattr(probe, "unwrapped") else probe, "accepted_actions", ACTION_KINDS)
        finally:
            probe.close()
    else:
        from agentic_rl.env.registry import spec

        kinds = getattr(spec(env_id).load(), "accepted_actions", ACTION_KINDS)
    return [OPENERS[kind] for kind in kinds if kind in OPENERS]


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate."""
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def evaluate_heldout(rollout_fn: RolloutFn | Callable[..., list[Trajectory]], tasks: Sequence[Task], *,
                     seed: int, greedy: bool, temperature: float, top_p: float, max_new_tokens: int,
                     max_turns: int) -> tuple[dict[str, Any], list[Trajectory]]:
    """One pass over ``tasks`` (one episode each, fixed seeds): the ``eval.jsonl`` row and the episodes."""
    trajs = rollout_fn(list(tasks), group_size=1, seeds=[seed + i for i in range(len(tasks))],
                       temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, greedy=greedy,
                       max_turns=max_turns, epsilon=0.0)
    n = len(trajs)
    wins = sum(1 for t in trajs if t.success)
    low, high = wilson_interval(wins, n)
    steps_success = [t.num_turns for t in trajs if t.success]
    row = {
        "success_rate": wins / n if n else 0.0, "success_ci_low": low, "success_ci_high": high,
        "mean_reward": sum(t.total_reward for t in trajs) / n if n else 0.0,
        "mean_steps": sum(t.num_turns for t in trajs) / n if n else 0.0,
        "mean_steps_success": sum(steps_success) / len(steps_success) if steps_success else None,
        "episodes": n, "greedy": greedy,
    }
    return row, trajs
