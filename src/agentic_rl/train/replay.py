"""Anti-forgetting: a replay buffer of past successful trajectories (replayed with an NLL loss)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from agentic_rl.rollout.trajectory import Trajectory


class ReplayBuffer:
    """The last ``capacity`` successful trajectories (oldest evicted first), sampled uniformly.

    Replaying successes as an imitation loss keeps skills the policy already had while RL moves it
    elsewhere (e.g. easier curriculum levels it no longer samples).
    """

    def __init__(self, capacity: int, seed: int = 0, max_group_success: float = 1.0):
        self.capacity = capacity
        self.max_group_success = max_group_success
        self.items: list[Trajectory] = []
        self.rng = random.Random(seed)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, trajectories: Iterable[Trajectory]) -> int:
        """Add the successful, error-free trajectories that have a token ledger; return how many.

        With ``max_group_success < 1`` a success is kept only when its group (``traj.group``: the samples
        of one task in one batch) succeeded at most that often — a rare success is a skill the policy is
        only starting to find, and imitating it spreads it faster than the advantage alone.
        """
        trajectories = list(trajectories)

        def group_of(traj: Trajectory) -> Any:  # an ungrouped trajectory is a group of its own
            return traj.group if traj.group is not None else id(traj)

        outcomes: dict[Any, list[bool]] = {}
        for traj in trajectories:
            outcomes.setdefault(group_of(traj), []).append(bool(traj.success))
        added = 0
        for traj in trajectories:
            group = outcomes[group_of(traj)]
            rare = sum(group) / len(group) <= self.max_group_success
            if traj.success and not traj.is_error and traj.segments and self.capacity > 0 and rare:
                self.items.append(traj)
                added += 1
        if len(self.items) > self.capacity:
            del self.items[: len(self.items) - self.capacity]
        return added

    def sample(self, n: int) -> list[Trajectory]:
        if not self.items or n <= 0:
            return []
        return self.rng.sample(self.items, min(n, len(self.items)))

    def state_dict(self) -> dict[str, Any]:
        return {"items": [t.to_dict() for t in self.items], "rng": self.rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.items = [Trajectory.from_dict(t) for t in state.get("items", [])]
        if "rng" in state:
            self.rng.setstate(_as_rng_state(state["rng"]))


def _as_rng_state(raw: Any) -> tuple:
    """``random.getstate()`` after a JSON round trip (lists back to tuples)."""
    version, internal, gauss = raw
    return (version, tuple(internal), gauss)
