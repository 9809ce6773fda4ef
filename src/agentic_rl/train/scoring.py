"""Scoring a rollout batch: reference logprobs and values (one no-grad pass), then advantages per token.

Credit assignment (``credit``):

- ``turn`` — every turn is one step: its reward is the env's reward for that turn, its value the critic's
  estimate at the turn's first sampled token. Per-turn advantages are broadcast to the turn's sampled
  tokens; env and prompt tokens get exactly 0.
- ``token`` — every sampled token is one step; a turn's reward sits on its last sampled token and the
  env tokens between turns are not steps (``gae`` skips them).

A turn with no sampled token (a forced ε-greedy action) still counts as a step for its reward; with
``turn`` credit its value estimate is 0, with ``token`` credit its reward joins the previous token's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from agentic_rl.algos import advantages as advantage_fn
from agentic_rl.algos import efficiency_bonus, steps_to_tokens
from agentic_rl.rollout.trajectory import Trajectory
from agentic_rl.train.batching import Sample, collate, micro_batches
from agentic_rl.train.forward import Reference, policy_forward


@torch.no_grad()
def annotate(samples: Sequence[Sample], model: nn.Module, *, reference: Reference | None,
             value_head: nn.Module | None, temperature: float, token_budget: int, pad_token_id: int,
             device: torch.device | str = "cpu") -> None:
    """Fill ``ref_logprobs`` (when a reference is given) and ``old_values`` (when a value head is given)."""
    if reference is None and value_head is None:
        return
    for group in micro_batches([len(s) for s in samples], token_budget):
        batch = collate([samples[i] for i in group], pad_token_id).to(device)
        ref = values = None
        if reference is not None:
            ref = reference.logprobs(batch.input_ids, batch.attention_mask, batch.loss_mask, temperature)
        if value_head is not None:
            values = policy_forward(model, batch.input_ids, batch.attention_mask, batch.loss_mask,
                                    temperature=temperature, value_head=value_head, with_entropy=False).values
        for row, index in enumerate(group):
            n = len(samples[index])
            if ref is not None:
                samples[index].ref_logprobs = ref[row, :n].cpu().tolist()
            if values is not None:
                samples[index].old_values = values[row, :n].cpu().tolist()


def _group_ids(trajectories: Sequence[Trajectory]) -> Tensor:
    ids: dict[str, int] = {}
    out = []
    for i, traj in enumerate(trajectories):
        key = traj.group if traj.group is not None else f"__episode_{i}"
        out.append(ids.setdefault(key, len(ids)))
    return torch.tensor(out, dtype=torch.long)


def _turn_rewards(trajectories: Sequence[Trajectory], samples: Sequence[Sample], kl_penalty: float,
                  efficiency_coef: float = 0.0, groups: Tensor | None = None) -> list[list[float]]:
    """Per-turn rewards, minus ``kl_penalty`` × the turn's summed k1 KL when the KL is a reward penalty,
    plus the group-relative :func:`~agentic_rl.algos.efficiency_bonus` on each episode's last turn."""
    rewards = [[float(t.reward) for t in traj.turns] or [0.0] for traj in trajectories]
    if efficiency_coef and trajectories:
        assert groups is not None
        steps = torch.tensor([float(traj.num_turns) for traj in trajectories])
        won = torch.tensor([bool(traj.success) for traj in trajectories])
        for row, bonus in zip(rewards, efficiency_bonus(steps, won, groups, efficiency_coef).tolist(), strict=True):
            row[-1] += bonus
    if kl_penalty:
        for s in samples:
            for pos, step in enumerate(s.token_steps):
                if step >= 0 and s.ref_logprobs and step < len(rewards[s.episode]) and not math.isnan(s.old_logprobs[pos]):
                    rewards[s.episode][step] -= kl_penalty * (s.old_logprobs[pos] - s.ref_logprobs[pos])
    return rewards


def _pad_rows(rows: list[list[float]]) -> tuple[Tensor, Tensor]:
    width = max(len(r) for r in rows)
    values = torch.zeros(len(rows), width)
    mask = torch.zeros(len(rows), width)
    for i, row in enumerate(rows):
        values[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1.0
    return values, mask


def _whiten(adv: Tensor, mask: Tensor) -> Tensor:
    valid = mask.bool()
    if valid.sum() < 2:
        return adv
    return (adv - adv[valid].mean()) / (adv[valid].std() + 1e-6) * mask


def score(trajectories: Sequence[Trajectory], samples: Sequence[Sample], *, estimator: str, gamma: float,
          lam: float, norm_std: bool, credit: str = "turn", kl_penalty: float = 0.0,
          efficiency_coef: float = 0.0) -> Tensor:
    """Fill each sample's per-token ``advantages`` and ``returns``; return per-episode scores ``[B]``.

    ``estimator`` is a registered advantage name. For ``gae``, samples must carry ``old_values`` (see
    :func:`annotate`); value targets are the un-whitened advantages plus those values. ``efficiency_coef``
    > 0 adds :func:`~agentic_rl.algos.efficiency_bonus` (shorter successes of a group score higher) to
    each episode's final reward. The returned scores include it.
    """
    fn = advantage_fn(estimator)
    groups = _group_ids(trajectories)
    turn_rewards = _turn_rewards(trajectories, samples, kl_penalty, efficiency_coef, groups)
    needs_values = estimator == "gae"
    if credit == "token":
        return _score_tokens(fn, samples, turn_rewards, groups, gamma, lam, norm_std, needs_values)
    rewards, mask = _pad_rows(turn_rewards)
    values = torch.zeros_like(rewards)
    if needs_values:
        for s in samples:  # the value of a turn = the estimate at its first sampled token
            for pos, step in enumerate(s.token_steps):
                if step >= 0 and (pos == 0 or s.token_steps[pos - 1] != step) and step < values.shape[1]:
                    values[s.episode, step] = s.old_values[pos]
    raw = fn(rewards, mask, groups, values if needs_values else None, gamma=gamma, lam=lam,
             norm_std=norm_std and not needs_values)
    adv = _whiten(raw, mask) if needs_values and norm_std else raw
    returns = raw + values
    for s in samples:
        steps = torch.tensor([s.token_steps])
        s.advantages = steps_to_tokens(adv[s.episode : s.episode + 1], steps)[0].tolist()
        s.returns = steps_to_tokens(returns[s.episode : s.episode + 1], steps)[0].tolist()
    return (rewards * mask).sum(1)


def _score_tokens(fn, samples: Sequence[Sample], turn_rewards: list[list[float]], groups: Tensor, gamma: float,
                  lam: float, norm_std: bool, needs_values: bool) -> Tensor:
    """Token-level credit: one step per sampled token, in ledger order across an episode's segments."""
    positions: list[list[tuple[int, int]]] = [[] for _ in turn_rewards]  # (sample index, position)
    for si, s in enumerate(samples):
        positions[s.episode].extend((si, p) for p, step in enumerate(s.token_steps) if step >= 0)
    width = max(1, max(len(p) for p in positions))
    rewards = torch.zeros(len(turn_rewards), width)
    values = torch.zeros_like(rewards)
    mask = torch.zeros_like(rewards)
    for episode, plist in enumerate(positions):
        last_of_turn: dict[int, int] = {}
        for k, (si, p) in enumerate(plist):
            last_of_turn[samples[si].token_steps[p]] = k
            mask[episode, k] = 1.0
            if needs_values:
                values[episode, k] = samples[si].old_values[p]
        for turn, reward in enumerate(turn_rewards[episode]):
            # a turn without sampled tokens hands its reward to the latest earlier token
            earlier = [k for t, k in last_of_turn.items() if t <= turn]
            if earlier:
                rewards[episode, last_of_turn.get(turn, max(earlier))] += reward
    raw = fn(rewards, mask, groups, values if needs_values else None, gamma=gamma, lam=lam,
             norm_std=norm_std and not needs_values)
    adv = _whiten(raw, mask) if needs_values and norm_std else raw
    returns = raw + values
    for s in samples:
        s.advantages, s.returns = [0.0] * len(s), [0.0] * len(s)
    for episode, plist in enumerate(positions):
        for k, (si, p) in enumerate(plist):
            samples[si].advantages[p] = float(adv[episode, k])
            samples[si].returns[p] = float(returns[episode, k])
    return torch.tensor([sum(r) for r in turn_rewards])
