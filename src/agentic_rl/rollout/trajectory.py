"""Trajectory: the unit that flows from rollout to training and evaluation.

Per turn: the observation the policy answered, the action text, the exact token ids it sampled with
their sampling logprobs, reward and reward terms, info and timings.

Per episode: the **token ledger** — one or more :class:`Segment` s. A segment is a flat token sequence
(prompt, actions, observations, chat-template glue) with ``loss_mask`` (1 = sampled by the policy,
0 = prompt / environment / forced tokens) and ``logprobs`` (sampling logprob where mask is 1, else 0).
A normal episode has one segment; each time memory rebuilds the context (older turns dropped or
summarised) a new segment starts, and ``context_rebuilds`` counts them. The trainer treats each segment
as one sequence.

``termination`` is ``"success"``, ``"failed"``, ``"truncated"`` or ``"error:<kind>"`` (env crash,
timeout...). A failed episode is still a Trajectory: a bad rollout is data, not a crash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Turn:
    observation: str
    action: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reward: float = 0.0
    reward_terms: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    forced: bool = False  # the action was forced (e.g. ε-greedy over admissible actions): not trained on
    explored: str = ""  # an opener the rollout forced at the start of the action (kind exploration)
    info: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class Segment:
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    #: for each turn in this segment: (turn index, start, end) of its action tokens in ``token_ids``
    turn_spans: list[tuple[int, int, int]] = field(default_factory=list)
    #: (start, end) of action tokens the rollout forced as an opener (kind exploration): mask 1 — the
    #: policy is trained on them like on its own — but their logprob here is 0, as nothing sampled them
    explored_spans: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.turn_spans = [tuple(s) for s in self.turn_spans]  # type: ignore[misc]
        self.explored_spans = [tuple(s) for s in self.explored_spans]  # type: ignore[misc]

    def check(self) -> None:
        n = len(self.token_ids)
        assert len(self.loss_mask) == n and len(self.logprobs) == n, "ledger arrays differ in length"


@dataclass
class Trajectory:
    task_id: str | None
    env_id: str = ""
    turns: list[Turn] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    termination: str = "failed"
    success: bool = False
    difficulty: int = 0
    group: str | None = None  # trajectories sampled for the same task in one batch share a group id
    seed: int | None = None
    context_rebuilds: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)

    # -- derived -------------------------------------------------------------------------------
    @property
    def total_reward(self) -> float:
        return float(sum(t.reward for t in self.turns))

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def is_error(self) -> bool:
        return self.termination.startswith("error:")

    @property
    def num_sampled_tokens(self) -> int:
        return sum(sum(s.loss_mask) for s in self.segments)

    # -- (de)serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return _json_safe(asdict(self))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Trajectory:
        raw = dict(raw)
        turns = [Turn(**t) for t in raw.pop("turns", [])]
        segments = [Segment(**s) for s in raw.pop("segments", [])]
        return cls(turns=turns, segments=segments, **raw)


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    return repr(value)


def save_jsonl(trajectories: Iterable[Trajectory], path: str | Path, append: bool = False) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for traj in trajectories:
            fh.write(json.dumps(traj.to_dict(), ensure_ascii=False) + "\n")


def load_jsonl(path: str | Path) -> list[Trajectory]:
    return list(iter_jsonl(path))


def iter_jsonl(path: str | Path) -> Iterator[Trajectory]:
    """Trajectories from a JSONL file; a torn last line (killed writer) is skipped."""
    with Path(path).open(encoding="utf-8") as fh:
        lines = fh.readlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                return
            raise ValueError(f"{path}:{i + 1}: not valid JSON") from None
        yield Trajectory.from_dict(raw)
