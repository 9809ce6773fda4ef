"""Advantage estimators: registered pure functions with one signature.

Every estimator is called as::

    fn(rewards, masks, groups, values=None, *, gamma=1.0, lam=1.0, norm_std=True, eps=1e-6) -> Tensor

- ``rewards``: float ``[B, K]`` — the reward of each *step* of each episode (padded with zeros). A step is
  a turn for turn-level credit assignment, or a token for the token-level option (then env tokens are
  steps with mask 0).
- ``masks``: ``[B, K]``, 1 (or True) on real steps, 0 on padding / steps that are not the policy's.
- ``groups``: long ``[B]``, episodes sampled for the same task in one batch share an id (GRPO groups).
- ``values``: float ``[B, K]`` value estimates at each step (only ``gae`` needs them).

The result is ``[B, K]`` advantages, exactly 0 where ``masks`` is 0. Outcome estimators (``grpo``,
``rloo``) give every step of an episode the same advantage; :func:`steps_to_tokens` broadcasts per-turn
advantages to the tokens of each turn.
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentic_rl.algos.registry import register_advantage


def _group_index(groups: Tensor) -> tuple[Tensor, int]:
    """Each episode's group as 0 .. G-1, and G."""
    _, index = torch.unique(groups, return_inverse=True)
    return index, int(index.max().item()) + 1 if index.numel() else 0


def _group_stats(scores: Tensor, groups: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per-episode (group size, group sum, unbiased group std) for ``scores`` ``[B]``."""
    index, num_groups = _group_index(groups)
    count = torch.zeros(num_groups, dtype=scores.dtype, device=scores.device).index_add_(0, index, torch.ones_like(scores))
    total = torch.zeros_like(count).index_add_(0, index, scores)
    mean = total / count
    sq = torch.zeros_like(count).index_add_(0, index, (scores - mean[index]) ** 2)
    # unbiased std as in most GRPO implementations; a group of one has no spread (std 0)
    std = torch.where(count > 1, (sq / (count - 1).clamp(min=1)).sqrt(), torch.zeros_like(sq))
    return count[index], total[index], std[index]


def _episode_scores(rewards: Tensor, masks: Tensor) -> Tensor:
    return (rewards * masks).sum(dim=1)


def _whiten(adv: Tensor, masks: Tensor, eps: float) -> Tensor:
    valid = masks.bool()
    if valid.sum() < 2:
        return adv * masks
    mean = adv[valid].mean()
    std = adv[valid].std()
    return (adv - mean) / (std + eps) * masks


@register_advantage("grpo")
def grpo(rewards: Tensor, masks: Tensor, groups: Tensor, values: Tensor | None = None, *, gamma: float = 1.0,
         lam: float = 1.0, norm_std: bool = True, eps: float = 1e-6) -> Tensor:
    """Group-relative: (episode return − group mean) / (group std + eps); ``norm_std=False`` skips the
    division (Dr. GRPO). A group whose returns are all equal gets advantage 0 (no learning signal)."""
    masks = masks.to(rewards.dtype)
    scores = _episode_scores(rewards, masks)
    count, total, std = _group_stats(scores, groups)
    adv = scores - total / count
    if norm_std:  # a group without spread has adv 0: keep it 0 even with eps=0
        adv = torch.where(std > 0, adv / (std + eps), torch.zeros_like(adv))
    return adv[:, None] * masks


@register_advantage("rloo")
def rloo(rewards: Tensor, masks: Tensor, groups: Tensor, values: Tensor | None = None, *, gamma: float = 1.0,
         lam: float = 1.0, norm_std: bool = True, eps: float = 1e-6) -> Tensor:
    """Leave-one-out: episode return − mean return of the *other* episodes of its group. A group of one
    has no baseline and gets advantage 0. (``norm_std`` is ignored: RLOO is unbiased without it.)"""
    masks = masks.to(rewards.dtype)
    scores = _episode_scores(rewards, masks)
    count, total, _ = _group_stats(scores, groups)
    others = (total - scores) / (count - 1).clamp(min=1)
    adv = torch.where(count > 1, scores - others, torch.zeros_like(scores))
    return adv[:, None] * masks


def _returns_to_go(rewards: Tensor, masks: Tensor, gamma: float) -> Tensor:
    out = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(rewards.shape[1])):
        m = masks[:, t].bool()
        running = torch.where(m, rewards[:, t] + gamma * running, running)
        out[:, t] = running * masks[:, t]
    return out


@register_advantage("reinforce_pp")
def reinforce_pp(rewards: Tensor, masks: Tensor, groups: Tensor, values: Tensor | None = None, *,
                 gamma: float = 1.0, lam: float = 1.0, norm_std: bool = True, eps: float = 1e-6) -> Tensor:
    """REINFORCE++ with baseline: discounted return-to-go of each step (γ across steps) minus a baseline
    — the mean episode return of its group when the group has more than one episode, else of the whole
    batch — then whitened over all valid steps of the batch (``norm_std``)."""
    masks = masks.to(rewards.dtype)
    returns = _returns_to_go(rewards, masks, gamma)
    scores = _episode_scores(rewards, masks)
    count, total, _ = _group_stats(scores, groups)
    baseline = torch.where(count > 1, total / count, scores.mean().expand_as(scores))
    adv = (returns - baseline[:, None]) * masks
    return _whiten(adv, masks, eps) if norm_std else adv


@register_advantage("gae")
def gae(rewards: Tensor, masks: Tensor, groups: Tensor, values: Tensor | None = None, *, gamma: float = 1.0,
        lam: float = 1.0, norm_std: bool = True, eps: float = 1e-6) -> Tensor:
    """Generalised advantage estimation over the valid steps of each episode.

    δ_t = r_t + γ V(next valid step) − V_t, A_t = δ_t + γλ A(next valid step); steps with mask 0 are
    skipped (their reward must be 0), so with token-level steps the env tokens between turns do not
    count as time steps. The episode ends after its last valid step (bootstrap value 0). Value targets
    are ``A + values`` (before whitening). ``norm_std`` whitens the advantages over the batch.
    """
    if values is None:
        raise ValueError("advantage 'gae' needs value estimates (values=...): enable the value head")
    masks_f = masks.to(rewards.dtype)
    valid = masks.bool()
    adv = torch.zeros_like(rewards)
    next_value = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    next_adv = torch.zeros_like(next_value)
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        step_adv = delta + gamma * lam * next_adv
        adv[:, t] = step_adv * masks_f[:, t]
        next_value = torch.where(valid[:, t], values[:, t], next_value)
        next_adv = torch.where(valid[:, t], step_adv, next_adv)
    return _whiten(adv, masks_f, eps) if norm_std else adv


def efficiency_bonus(steps: Tensor, success: Tensor, groups: Tensor, coef: float) -> Tensor:
    """Per-episode bonus ``[B]`` that ranks the *successful* episodes of a group by their length.

    Within a group, a success with the fewest steps gets ``+coef / 2``, one with the most ``-coef / 2``,
    linearly in between (the length reward of Kimi k1.5, over env steps instead of tokens). Failed
    episodes, and groups whose successes all took the same number of steps, get exactly 0. Being relative
    to the group's own successes, it never pays for failing fast (a per-step cost does) and it is not
    drowned when the fixed cost of a step is small next to the outcome; ``coef < 2`` keeps every success
    above every failure of its group. ``steps``: float ``[B]``; ``success``: bool ``[B]``.
    """
    if coef < 0:
        raise ValueError(f"efficiency coef must be >= 0, got {coef}")
    steps = steps.to(torch.float32)
    index, num_groups = _group_index(groups)
    inf = torch.full((num_groups,), float("inf"), device=steps.device)
    won = success.bool()
    low = inf.scatter_reduce(0, index[won], steps[won], reduce="amin")
    high = (-inf).scatter_reduce(0, index[won], steps[won], reduce="amax")
    spread = (high - low)[index]
    rank = (steps - low[index]) / torch.where(spread > 0, spread, torch.ones_like(spread))
    return torch.where(won & (spread > 0), coef * (0.5 - rank), torch.zeros_like(steps))


def steps_to_tokens(step_values: Tensor, token_steps: Tensor) -> Tensor:
    """Broadcast per-step (per-turn) values ``[B, K]`` to tokens: ``token_steps`` ``[B, L]`` holds the
    step index of each token, or -1 for tokens of no step (prompt, env tokens) which get exactly 0."""
    index = token_steps.clamp(min=0)
    gathered = torch.gather(step_values, 1, index)
    return torch.where(token_steps >= 0, gathered, torch.zeros_like(gathered))
