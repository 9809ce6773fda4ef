"""Task samplers for RL: a success-driven curriculum over difficulty levels, and zero-variance dropping.

:class:`TaskSampler` draws each iteration's tasks.

- **Curriculum** (``curriculum=True``): starts at ``start_level`` (the easiest by default). Once the last
  ``window`` episodes at the current level reach ``promote_threshold`` success it moves up a level; if
  they fall to ``demote_threshold`` or below it moves down (``None``: never; each move restarts the window). A share
  ``lower_level_mix`` of the tasks comes from easier levels so earlier skills keep being practised.
  Without the curriculum, tasks are drawn uniformly from every level.
- **Zero-variance dropping**: a task whose group of episodes all got the same reward gives GRPO-style
  estimators no signal. After ``zero_variance_patience`` such groups in a row it is skipped for
  ``zero_variance_cooldown`` iterations (if every task is skipped, skipping is ignored).

All state (level, recent outcomes, skip list, RNG) round-trips through :meth:`state_dict` for resume.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from typing import Any

from agentic_rl.rollout.trajectory import Trajectory
from agentic_rl.tasks.core import Task, TaskSet


def group_reward_variance(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Population variance of total reward per group id (trajectories without a group are skipped)."""
    by_group: dict[str, list[float]] = defaultdict(list)
    for traj in trajectories:
        if traj.group is not None:
            by_group[traj.group].append(traj.total_reward)
    out = {}
    for group, rewards in by_group.items():
        mean = sum(rewards) / len(rewards)
        out[group] = sum((r - mean) ** 2 for r in rewards) / len(rewards)
    return out


def drop_zero_variance(trajectories: Sequence[Trajectory], tolerance: float = 1e-12) -> list[Trajectory]:
    """The trajectories whose group has some reward spread (ungrouped ones are kept)."""
    variance = group_reward_variance(trajectories)
    return [t for t in trajectories if t.group is None or variance[t.group] > tolerance]


def drop_failed_groups(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """The trajectories whose group has at least one success (ungrouped ones are kept).

    In a group where every episode fails, rewards differ only by shaping, step costs and penalties; group
    normalisation scales those small differences up to full-size advantages, which teaches a policy that
    cannot yet solve the task to fail *cheaply* (answer at once rather than try a tool). Dropping such
    groups keeps the update to what separates success from failure (as DAPO's dynamic sampling does).
    """
    succeeded = _succeeded_groups(trajectories)
    return [t for t in trajectories if t.group is None or t.group in succeeded]


def failed_group_share(trajectories: Sequence[Trajectory]) -> float:
    """Share of the groups (ungrouped trajectories aside) in which no episode succeeded."""
    groups = {t.group for t in trajectories if t.group is not None}
    return len(groups - _succeeded_groups(trajectories)) / max(1, len(groups))


def _succeeded_groups(trajectories: Sequence[Trajectory]) -> set[str | None]:
    return {t.group for t in trajectories if t.success}


class TaskSampler:
    """Draws training tasks; see the module docstring for the curriculum and zero-variance rules."""

    def __init__(self, tasks: TaskSet, *, curriculum: bool = False, start_level: int = 0,
                 promote_threshold: float = 0.8, demote_threshold: float | None = 0.2, window: int = 32,
                 lower_level_mix: float = 0.2, zero_variance_patience: int = 2, zero_variance_cooldown: int = 5,
                 seed: int = 0):
        if len(tasks) == 0:
            raise ValueError(f"{tasks.name}: no training tasks to sample from")
        self.tasks = tasks
        self.levels = tasks.levels()
        self.curriculum = curriculum
        eligible = [i for i, lvl in enumerate(self.levels) if lvl >= start_level]
        self.level_index = eligible[0] if eligible else len(self.levels) - 1
        self.promote_threshold = promote_threshold
        self.demote_threshold = demote_threshold
        self.window = window
        self.lower_level_mix = lower_level_mix
        self.zero_variance_patience = zero_variance_patience
        self.zero_variance_cooldown = zero_variance_cooldown
        self.rng = random.Random(seed)
        self.recent: deque[float] = deque(maxlen=window)
        self.zero_streak: dict[str, int] = {}
        self.skip_until: dict[str, int] = {}
        self.last_mix: dict[int, float] = {}

    @property
    def level(self) -> int:
        """The current difficulty level (the curriculum's frontier)."""
        return self.levels[self.level_index]

    def _pool(self, tasks: list[Task], iteration: int) -> list[Task]:
        kept = [t for t in tasks if self.skip_until.get(t.id, -1) <= iteration]
        return kept or tasks

    def sample(self, n: int, iteration: int = 0) -> list[Task]:
        """``n`` tasks for this iteration (with replacement only when a pool is smaller than needed)."""
        if not self.curriculum:
            chosen = self._draw(self._pool(list(self.tasks), iteration), n)
        else:
            current = self._pool([t for t in self.tasks if t.difficulty == self.level], iteration)
            lower = self._pool([t for t in self.tasks if t.difficulty < self.level], iteration)
            n_lower = sum(self.rng.random() < self.lower_level_mix for _ in range(n)) if lower else 0
            chosen = self._draw(current, n - n_lower) + self._draw(lower, n_lower)
        counts = Counter(t.difficulty for t in chosen)
        self.last_mix = {level: counts[level] / max(1, len(chosen)) for level in sorted(counts)}
        return chosen

    def _draw(self, pool: list[Task], n: int) -> list[Task]:
        if n <= 0:
            return []
        if n <= len(pool):
            return self.rng.sample(pool, n)
        return [self.rng.choice(pool) for _ in range(n)]

    def update(self, trajectories: Sequence[Trajectory], iteration: int = 0) -> list[dict[str, Any]]:
        """Record outcomes; return curriculum events (``promotion`` / ``demotion``) that happened."""
        for group, variance in group_reward_variance(trajectories).items():
            task_id = next(t.task_id for t in trajectories if t.group == group)
            if task_id is None:
                continue
            streak = self.zero_streak.get(task_id, 0) + 1 if variance <= 1e-12 else 0
            self.zero_streak[task_id] = streak
            if streak >= self.zero_variance_patience:
                self.skip_until[task_id] = iteration + 1 + self.zero_variance_cooldown
                self.zero_streak[task_id] = 0
        if not self.curriculum:
            return []
        self.recent.extend(float(t.success) for t in trajectories if t.difficulty == self.level)
        if len(self.recent) < self.window:
            return []
        success = sum(self.recent) / len(self.recent)
        old = self.level
        if success >= self.promote_threshold and self.level_index < len(self.levels) - 1:
            self.level_index += 1
        elif self.demote_threshold is not None and success <= self.demote_threshold and self.level_index > 0:
            self.level_index -= 1
        else:
            return []
        self.recent.clear()
        kind = "promotion" if self.level > old else "demotion"
        return [{"event": kind, "from_level": old, "to_level": self.level, "success": success}]

    def metrics(self) -> dict[str, float]:
        """``curriculum/level`` and the level mix of the last sample (``curriculum/mix_level_<k>``)."""
        out = {"curriculum/level": float(self.level)}
        out.update({f"curriculum/mix_level_{k}": v for k, v in self.last_mix.items()})
        out["curriculum/skipped_tasks"] = float(len(self.skip_until))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"level_index": self.level_index, "recent": list(self.recent), "zero_streak": dict(self.zero_streak),
                "skip_until": dict(self.skip_until), "rng": self.rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.level_index = int(state["level_index"])
        self.recent = deque(state["recent"], maxlen=self.window)
        self.zero_streak = dict(state["zero_streak"])
        self.skip_until = dict(state["skip_until"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
