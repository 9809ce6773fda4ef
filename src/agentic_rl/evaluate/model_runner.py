"""Playing the evaluation grid with a language-model policy through the batched rollout engine.

Policy specs: a loaded ``Policy`` or a ``RolloutEngine`` (reused as is); a run directory (its ``checkpoints/best``, else ``checkpoints/last``);
a checkpoint / HF directory; or an embedded model name such as ``smollm2-135m``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentic_rl.rollout.trajectory import Trajectory
from agentic_rl.tasks.core import Task


def resolve_checkpoint(spec: str | Path) -> Path | None:
    """The checkpoint directory a run dir or checkpoint path points to; ``None`` if ``spec`` is not a path."""
    path = Path(spec)
    if not path.exists():
        return None
    if (path / "checkpoints").is_dir():
        for name in ("best", "last"):
            if (path / "checkpoints" / name).is_dir():
                return path / "checkpoints" / name
        raise FileNotFoundError(f"run dir {path} has no checkpoints/best or checkpoints/last")
    return path


def load_any_policy(spec: Any) -> tuple[Any, str]:
    """A ``Policy`` from a spec (see the module docstring) and a label for tables."""
    if hasattr(spec, "model") and hasattr(spec, "tokenizer"):
        return spec, getattr(spec, "name", "") or "policy"
    from agentic_rl.models import load_policy

    checkpoint = resolve_checkpoint(spec)
    if checkpoint is not None:
        from agentic_rl.models.policy import Policy

        return Policy.load(checkpoint, is_trainable=False), str(spec)
    return load_policy(str(spec)), str(spec)


def model_runner(policy: Any, env_id: str, *, greedy: bool, max_turns: int, max_new_tokens: int,
                 temperature: float) -> tuple[Any, str]:
    """A runner (see :data:`agentic_rl.evaluate.harness.Runner`) decoding with ``policy``.

    One :func:`~agentic_rl.rollout.rollout` call per seed; the sampler is re-seeded from that seed, so the
    numbers do not depend on what ran before (determinism with sampling as well as greedy).
    """
    from agentic_rl.rollout import RolloutEngine, SamplingParams, rollout

    if isinstance(policy, RolloutEngine):  # the trainer's own engine: no second KV cache, current weights
        engine, label = policy, getattr(policy.policy, "name", "") or "policy"
    else:
        loaded, label = load_any_policy(policy)
        # 64 rows: a demo-sized grid (48 tasks) decodes in one wave instead of 32 + 16 (measured ≈ 15 % faster)
        engine = RolloutEngine(loaded, max_batch=64)

    def run(tasks: list[Task], seeds: list[int], samples_k: int, env_kwargs: dict[str, Any]) -> list[Trajectory]:
        out: list[Trajectory] = []
        for seed in seeds:
            sampling = SamplingParams(greedy=greedy, temperature=temperature, max_new_tokens=max_new_tokens,
                                      seed=seed)
            trajs = rollout(engine, env_id, tasks, group_size=samples_k, seeds=[seed] * len(tasks),
                            sampling=sampling, max_turns=max_turns, env_kwargs=env_kwargs)
            for index, traj in enumerate(trajs):  # task i's samples are trajs[i*k:(i+1)*k]
                task = tasks[index // samples_k]
                traj.seed = seed
                traj.difficulty = task.difficulty
                traj.metadata["eval_key"] = f"{task.id}|{seed}|{index % samples_k}"
            out.extend(trajs)
        return out

    return run, label
