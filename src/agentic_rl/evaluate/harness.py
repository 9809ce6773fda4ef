"""``evaluate``: run a policy on a task split (clean and perturbed) and summarise what happened.

A *policy* is one of:

- ``"expert"`` or ``"expert:<skill>"``: the env's scripted expert (no model needed) — the reference;
- a callable ``agent(observation: str, info: dict) -> str`` (baselines, scripted agents, tests);
- a loaded :class:`agentic_rl.models.Policy` or a :class:`agentic_rl.rollout.RolloutEngine` (the trainer
  passes its own engine for held-out evaluations), or a string/path that :func:`agentic_rl.models.load_policy`
  understands (embedded model name, HF dir, checkpoint dir). A run directory resolves to its
  ``checkpoints/best`` (else ``checkpoints/last``).

Episodes form a grid: every task × every seed × ``samples_k`` samples. The env is reset with the seed, so
the same (task, seed) is the same episode for every policy — that is what makes ``--compare`` paired.
Determinism: the same policy, tasks and seeds give the same numbers (greedy decoding; with sampling,
torch is re-seeded from the seed before each batch).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentic_rl.evaluate.audit import audit
from agentic_rl.evaluate.failures import analyze_failures
from agentic_rl.evaluate.result import EvalResult, summarize
from agentic_rl.rollout.trajectory import Trajectory, Turn
from agentic_rl.tasks.core import Task, TaskSet

logger = logging.getLogger(__name__)

Agent = Callable[[str, dict], str]
#: ``run(tasks, seeds, samples_k, env_kwargs) -> trajectories`` (each tagged with ``metadata["eval_key"]``)
Runner = Callable[[list[Task], list[int], int, dict[str, Any]], list[Trajectory]]
SAMPLE_SEED_STRIDE = 1_000_003  # expert/agent samples j > 0 reset the env with seed + j * stride


def evaluate(policy: Any, env_id: str, tasks: TaskSet | Sequence[Task] | str | Path | None = None, *,
             split: str = "test", seeds: Sequence[int] = (0,), greedy: bool = True, samples_k: int = 1,
             perturbations: Sequence[str] = (), max_turns: int = 10, max_new_tokens: int = 128,
             temperature: float = 1.0, limit: int | None = None, env_kwargs: dict[str, Any] | None = None,
             label: str | None = None) -> EvalResult:
    """Evaluate ``policy`` on ``env_id``'s ``split`` (or the given ``tasks``), clean and perturbed.

    ``samples_k > 1`` needs sampling (``greedy=False``): k identical greedy samples would make pass@k
    meaningless. ``perturbations`` are env perturbation names (``["all"]`` = every one the env declares);
    robustness = perturbed success rate / clean success rate (``nan`` when clean success is 0).
    ``limit`` keeps the first N tasks. Raises ``ValueError`` naming the bad argument.
    """
    if samples_k < 1:
        raise ValueError(f"samples_k must be >= 1, got {samples_k}")
    if samples_k > 1 and greedy:
        raise ValueError("samples_k > 1 needs sampling: pass greedy=False (greedy samples would all be equal)")
    if not seeds:
        raise ValueError("seeds must not be empty")
    env_kwargs = dict(env_kwargs or {})
    task_list = resolve_tasks(env_id, tasks, split, env_kwargs, limit)
    names = resolve_perturbations(env_id, perturbations, env_kwargs)
    runner, policy_label = make_runner(policy, env_id, greedy=greedy, max_turns=max_turns,
                                       max_new_tokens=max_new_tokens, temperature=temperature)
    clean = runner(task_list, list(seeds), samples_k, env_kwargs)
    result = EvalResult(policy=label or policy_label, env_id=env_id, split=split, seeds=list(seeds),
                        samples_k=samples_k, greedy=greedy, clean=summarize(clean, samples_k),
                        failures=analyze_failures(clean), audit=audit(clean), trajectories=clean)
    for name in names:
        trajs = runner(task_list, list(seeds), samples_k, {**env_kwargs, "perturbation": name})
        for traj in trajs:
            traj.metadata["perturbation"] = name
        result.perturbed_trajectories[name] = trajs
        result.perturbed[name] = summary = summarize(trajs, samples_k)
        clean_rate = result.clean.success_rate
        result.robustness[name] = summary.success_rate / clean_rate if clean_rate else float("nan")
    return result


# -- tasks and perturbations ------------------------------------------------------------------------
def resolve_tasks(env_id: str, tasks: TaskSet | Sequence[Task] | str | Path | None, split: str | None,
                  env_kwargs: dict[str, Any], limit: int | None = None) -> list[Task]:
    """The evaluation tasks: those given, else the env's own task set restricted to ``split``."""
    if isinstance(tasks, (str, Path)):
        from agentic_rl.env.registry import task_set

        chosen: list[Task] = list(task_set(env_id, env_kwargs, tasks))  # the env checks each task's data
    elif tasks is not None:
        chosen = list(tasks)
    else:
        chosen = _env_tasks(env_id, split, env_kwargs)
    if split and tasks is not None and any(t.split == split for t in chosen):
        chosen = [t for t in chosen if t.split == split]
    if limit is not None:
        chosen = chosen[: max(int(limit), 0)]
    if not chosen:
        raise ValueError(f"no tasks to evaluate for {env_id} (split={split!r}, limit={limit})")
    return chosen


def _env_tasks(env_id: str, split: str | None, env_kwargs: dict[str, Any]) -> list[Task]:
    from agentic_rl.env.registry import spec, task_set

    kwargs = dict(env_kwargs)
    if split:
        try:  # envs that take split= restrict their own task set; others are filtered below
            spec(env_id).check_kwargs({"split": split})
            kwargs["split"] = split
        except TypeError:
            pass
    taskset = task_set(env_id, kwargs)
    chosen = [t for t in taskset if not split or t.split == split]
    if not chosen:
        raise ValueError(f"{env_id}: no task in split {split!r}; splits present: {taskset.splits()}")
    return chosen


def resolve_perturbations(env_id: str, names: Sequence[str], env_kwargs: dict[str, Any]) -> list[str]:
    """Validate perturbation names against the env's declared list (``"all"`` expands to it)."""
    if not names:
        return []
    from agentic_rl.env.registry import spec

    declared = tuple(getattr(spec(env_id).load(), "perturbations", ()) or ())
    wanted = list(declared) if list(names) == ["all"] else list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in declared]
    if unknown:
        raise ValueError(f"{env_id}: unknown perturbation(s) {unknown}; declared: {', '.join(declared) or '(none)'}")
    return wanted


# -- runners -----------------------------------------------------------------------------------------
def make_runner(policy: Any, env_id: str, *, greedy: bool, max_turns: int, max_new_tokens: int,
                temperature: float) -> tuple[Runner, str]:
    """A function that plays the episode grid for ``policy``, and a label naming the policy."""
    if isinstance(policy, str) and (policy == "expert" or policy.startswith("expert:")):
        skill = float(policy.split(":", 1)[1]) if ":" in policy else 1.0
        if not 0.0 <= skill <= 1.0:
            raise ValueError(f"expert skill must be in [0, 1], got {skill}")
        return _text_runner(env_id, max_turns, expert_skill=skill), f"expert(skill={skill:g})"
    if callable(policy) and not hasattr(policy, "model"):
        return _text_runner(env_id, max_turns, agent=policy), getattr(policy, "__name__", "agent")
    from agentic_rl.evaluate.model_runner import model_runner

    return model_runner(policy, env_id, greedy=greedy, max_turns=max_turns, max_new_tokens=max_new_tokens,
                        temperature=temperature)


def _text_runner(env_id: str, max_turns: int, *, expert_skill: float | None = None,
                 agent: Agent | None = None) -> Runner:
    from agentic_rl.env.registry import make
    from agentic_rl.envs.experts import play_expert

    def run(tasks: list[Task], seeds: list[int], samples_k: int, env_kwargs: dict[str, Any]) -> list[Trajectory]:
        env = make(env_id, **env_kwargs)
        out: list[Trajectory] = []
        try:
            for task in tasks:
                for seed in seeds:
                    for sample in range(samples_k):
                        # the task id enters the env seed: with one shared seed every episode would
                        # draw the same random numbers (e.g. an expert's per-episode habit decision)
                        env_seed = (seed + sample * SAMPLE_SEED_STRIDE + zlib.crc32(task.id.encode())) % 2**31
                        if agent is None:
                            traj = play_expert(env, task, skill=expert_skill or 0.0, seed=env_seed,
                                               max_steps=max_turns, env_id=env_id)
                        else:
                            traj = play_agent(env, agent, task, seed=env_seed, max_steps=max_turns, env_id=env_id)
                        traj.seed = seed
                        traj.metadata["eval_key"] = f"{task.id}|{seed}|{sample}"
                        out.append(traj)
        finally:
            env.close()
        return out

    return run


def play_agent(env: Any, agent: Agent, task: Task | None, *, seed: int | None, max_steps: int,
               env_id: str = "") -> Trajectory:
    """One episode of a text agent ``agent(observation, info) -> action``. Agent exceptions end the episode
    as ``error:agent_error`` (a bad rollout is data, not a crash)."""
    observation, info = env.reset(seed=seed, options={"task": task} if task is not None else None)
    traj = Trajectory(task_id=info.get("task_id"), env_id=env_id, seed=seed,
                      difficulty=task.difficulty if task else 0,
                      metadata={"policy": getattr(agent, "__name__", "agent")})
    terminated = truncated = False
    for _ in range(max_steps):
        try:
            action = str(agent(observation, info))
        except Exception as exc:
            logger.warning("agent raised on %s: %s", traj.task_id, exc)
            traj.termination = "error:agent_error"
            traj.metadata["error"] = repr(exc)
            return traj
        next_obs, reward, terminated, truncated, info = env.step(action)
        traj.turns.append(Turn(observation=observation, action=action, reward=reward,
                               reward_terms=dict(info.get("reward_terms", {})), terminated=terminated,
                               truncated=truncated, info={k: v for k, v in info.items() if not k.startswith("_")}))
        observation = next_obs
        if terminated or truncated:
            break
    traj.success = bool(info.get("success", False))
    traj.termination = "success" if traj.success else ("failed" if terminated else "truncated")
    return traj
