"""From trajectories to padded training tensors: per-sequence samples, length buckets, token-budget
micro-batches.

Each ledger :class:`~agentic_rl.rollout.Segment` becomes one :class:`Sample` (one training sequence).
``token_steps`` maps every token to the turn whose action it belongs to (-1 for prompt, env and forced
tokens), so per-turn advantages can be broadcast to exactly the tokens the policy sampled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from agentic_rl.rollout.trajectory import Segment, Trajectory


@dataclass
class Sample:
    """One training sequence. ``episode`` indexes the trajectory list it came from."""

    token_ids: list[int]
    loss_mask: list[int]
    old_logprobs: list[float]
    token_steps: list[int]
    episode: int
    #: filled by the trainer: per-token advantages / value targets / old values (len == len(token_ids))
    advantages: list[float] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    old_values: list[float] = field(default_factory=list)
    ref_logprobs: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.token_ids)


def token_steps(segment: Segment) -> list[int]:
    """The turn index of each token of ``segment`` (-1 where the loss mask is 0)."""
    steps = [-1] * len(segment.token_ids)
    for turn_index, start, end in segment.turn_spans:
        for position in range(start, min(end, len(steps))):
            if segment.loss_mask[position]:
                steps[position] = int(turn_index)
    return steps


def samples_from_trajectories(trajectories: Sequence[Trajectory]) -> list[Sample]:
    """One sample per ledger segment that holds at least one sampled token (others carry no loss).

    Tokens of an explored opener (``Segment.explored_spans``) get ``old_logprobs`` NaN: nothing sampled
    them, so the update takes the current policy's own logprob there (ratio 1, see ``policy_step``).
    """
    samples = []
    for episode, traj in enumerate(trajectories):
        for segment in traj.segments:
            segment.check()
            if not any(segment.loss_mask):
                continue
            old = list(segment.logprobs)
            for start, end in segment.explored_spans:
                old[start:end] = [math.nan] * (end - start)
            samples.append(Sample(list(segment.token_ids), list(segment.loss_mask), old, token_steps(segment), episode))
    return samples


def micro_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Indices grouped so that each group's padded size (count × longest) stays within ``token_budget``.

    Sequences are bucketed by length (sorted) so little padding is wasted; a sequence longer than the
    budget gets a micro-batch of its own. The order of groups is deterministic.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    groups: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in order:
        candidate = max(longest, lengths[index])
        if current and candidate * (len(current) + 1) > token_budget:
            groups.append(current)
            current, candidate = [], lengths[index]
        current.append(index)
        longest = candidate
    if current:
        groups.append(current)
    return groups


@dataclass
class Batch:
    """Right-padded tensors ``[B, L]`` for a list of samples (padding has attention 0 and mask 0)."""

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    old_logprobs: Tensor
    token_steps: Tensor
    advantages: Tensor
    returns: Tensor
    old_values: Tensor
    ref_logprobs: Tensor | None

    def to(self, device: torch.device | str) -> Batch:
        moved = {k: (v.to(device) if isinstance(v, Tensor) else v) for k, v in vars(self).items()}
        return Batch(**moved)


def _pad(rows: list[list], length: int, value: float, dtype: torch.dtype) -> Tensor:
    out = torch.full((len(rows), length), value, dtype=dtype)
    for i, row in enumerate(rows):
        if row:
            out[i, : len(row)] = torch.tensor(row, dtype=dtype)
    return out


def collate(samples: Sequence[Sample], pad_token_id: int = 0) -> Batch:
    """Pad ``samples`` into a :class:`Batch` (unset advantages/returns/values are zeros)."""
    length = max(len(s) for s in samples)
    has_ref = all(s.ref_logprobs for s in samples)
    return Batch(
        input_ids=_pad([s.token_ids for s in samples], length, pad_token_id, torch.long),
        attention_mask=_pad([[1] * len(s) for s in samples], length, 0, torch.long),
        loss_mask=_pad([s.loss_mask for s in samples], length, 0, torch.float32),
        old_logprobs=_pad([s.old_logprobs for s in samples], length, 0.0, torch.float32),
        token_steps=_pad([s.token_steps for s in samples], length, -1, torch.long),
        advantages=_pad([s.advantages for s in samples], length, 0.0, torch.float32),
        returns=_pad([s.returns for s in samples], length, 0.0, torch.float32),
        old_values=_pad([s.old_values for s in samples], length, 0.0, torch.float32),
        ref_logprobs=_pad([s.ref_logprobs for s in samples], length, 0.0, torch.float32) if has_ref else None,
    )
