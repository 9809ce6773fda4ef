"""Policy and value losses: registered pure functions.

Every policy loss is called as::

    fn(logprobs, old_logprobs, advantages, mask, *, clip_low=0.2, clip_high=0.2, aggregation="token_mean",
       normalizer=None, ref_logprobs=None, kl_coef=0.0, kl_estimator="k3", entropy=None, entropy_coef=0.0)
    -> (loss: scalar Tensor, metrics: dict[str, float])

All tensors are ``[B, L]`` over token positions; ``mask`` is 1 on tokens the policy sampled (the
ledger's loss mask). Masked positions contribute exactly zero loss and zero gradient, whatever their
logprobs hold.

``aggregation`` (see :func:`aggregate`): ``token_mean`` (every sampled token weighs the same),
``seq_mean`` (mean per sequence, then mean over sequences) or ``seq_sum`` (sum per sequence, mean over
sequences; the Dr. GRPO choice). ``normalizer`` is the denominator to use instead of the one computed
from this batch: pass the total over the whole minibatch when it is split into micro-batches, so the
micro-batch losses *sum* to the minibatch loss (gradient accumulation then equals one big batch).
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentic_rl.algos.registry import register_policy_loss

AGGREGATIONS = ("token_mean", "seq_mean", "seq_sum")
KL_ESTIMATORS = ("k1", "k2", "k3")


def aggregation_normalizer(mask: Tensor, aggregation: str) -> float:
    """The denominator :func:`aggregate` uses for ``mask``: token count, or count of non-empty sequences."""
    if aggregation == "token_mean":
        return float(mask.sum().item())
    if aggregation in ("seq_mean", "seq_sum"):
        return float((mask.sum(dim=-1) > 0).sum().item())
    raise ValueError(f"unknown aggregation {aggregation!r}; valid: {', '.join(AGGREGATIONS)}")


def aggregate(values: Tensor, mask: Tensor, aggregation: str = "token_mean", normalizer: float | None = None) -> Tensor:
    """Reduce per-token ``values`` ``[B, L]`` over ``mask`` to a scalar (see the module docstring)."""
    mask = mask.to(values.dtype)
    denominator = aggregation_normalizer(mask, aggregation) if normalizer is None else float(normalizer)
    denominator = max(denominator, 1.0)
    masked = torch.where(mask > 0, values, torch.zeros_like(values))
    if aggregation == "token_mean":
        return masked.sum() / denominator
    per_seq = masked.sum(dim=-1)
    if aggregation == "seq_mean":
        per_seq = per_seq / mask.sum(dim=-1).clamp(min=1.0)
    return per_seq.sum() / denominator


def kl_divergence(logprobs: Tensor, ref_logprobs: Tensor, estimator: str = "k3") -> Tensor:
    """Per-token estimate of KL(policy ‖ reference) from sampled-token logprobs.

    ``k1`` = log π − log π_ref (unbiased, can be negative); ``k2`` = ½ (log π − log π_ref)²;
    ``k3`` = exp(log π_ref − log π) − (log π_ref − log π) − 1 (unbiased, never negative).
    """
    log_ratio = logprobs - ref_logprobs
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio**2
    if estimator == "k3":
        return torch.exp(-log_ratio) + log_ratio - 1.0
    raise ValueError(f"unknown KL estimator {estimator!r}; valid: {', '.join(KL_ESTIMATORS)}")


def _masked_mean(values: Tensor, mask: Tensor) -> float:
    total = mask.sum()
    if total <= 0:
        return 0.0
    return float((torch.where(mask > 0, values, torch.zeros_like(values)).sum() / total).item())


def _clean(values: Tensor | None, mask: Tensor) -> Tensor | None:
    """``values`` with 0 off the mask. Off-mask entries may be garbage (-inf logprobs of padding); through
    ``where`` their gradient is exactly 0 and nothing downstream can turn them into NaN."""
    if values is None:
        return None
    return torch.where(mask > 0, values, torch.zeros((), dtype=values.dtype, device=values.device))


def _regularise(loss: Tensor, metrics: dict[str, float], logprobs: Tensor, mask: Tensor, aggregation: str,
                normalizer: float | None, ref_logprobs: Tensor | None, kl_coef: float, kl_estimator: str,
                entropy: Tensor | None, entropy_coef: float) -> Tensor:
    """Add the KL-to-reference and entropy-bonus terms shared by every policy loss."""
    if ref_logprobs is not None:
        kl = kl_divergence(logprobs, ref_logprobs.detach(), kl_estimator)
        metrics["policy/kl"] = _masked_mean(kl.detach(), mask)
        if kl_coef:
            loss = loss + kl_coef * aggregate(kl, mask, aggregation, normalizer)
    if entropy is not None:
        metrics["policy/entropy"] = _masked_mean(entropy.detach(), mask)
        if entropy_coef:
            loss = loss - entropy_coef * aggregate(entropy, mask, aggregation, normalizer)
    return loss


@register_policy_loss("ppo_clip")
def ppo_clip(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor, *, clip_low: float = 0.2,
             clip_high: float = 0.2, aggregation: str = "token_mean", normalizer: float | None = None,
             ref_logprobs: Tensor | None = None, kl_coef: float = 0.0, kl_estimator: str = "k3",
             entropy: Tensor | None = None, entropy_coef: float = 0.0) -> tuple[Tensor, dict[str, float]]:
    """PPO's clipped surrogate with an asymmetric range: ratio clipped to [1 − clip_low, 1 + clip_high]
    (a larger ``clip_high`` lets rare good tokens grow: DAPO's clip-higher)."""
    mask = mask.to(logprobs.dtype)
    logprobs, old_logprobs, advantages = _clean(logprobs, mask), _clean(old_logprobs, mask), _clean(advantages, mask)
    ref_logprobs, entropy = _clean(ref_logprobs, mask), _clean(entropy, mask)
    # masked positions now have log-ratio 0 (ratio 1) and receive no gradient
    log_ratio = logprobs - old_logprobs.detach()
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    loss = aggregate(per_token, mask, aggregation, normalizer)
    metrics = {
        "policy/clip_frac": _masked_mean((clipped > unclipped).to(mask.dtype), mask),
        "policy/approx_kl_old": _masked_mean((torch.exp(-log_ratio) + log_ratio - 1.0).detach(), mask),
        "policy/ratio_mean": _masked_mean(ratio.detach(), mask),
    }
    loss = _regularise(loss, metrics, logprobs, mask, aggregation, normalizer, ref_logprobs, kl_coef,
                       kl_estimator, entropy, entropy_coef)
    metrics["loss/policy"] = float(loss.detach().item())
    return loss, metrics


@register_policy_loss("reinforce")
def reinforce(logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor, *, clip_low: float = 0.2,
              clip_high: float = 0.2, aggregation: str = "token_mean", normalizer: float | None = None,
              ref_logprobs: Tensor | None = None, kl_coef: float = 0.0, kl_estimator: str = "k3",
              entropy: Tensor | None = None, entropy_coef: float = 0.0) -> tuple[Tensor, dict[str, float]]:
    """Vanilla policy gradient −A·log π (on-policy: no ratio, no clipping; ``clip_*`` are ignored)."""
    mask = mask.to(logprobs.dtype)
    logprobs, advantages = _clean(logprobs, mask), _clean(advantages, mask)
    ref_logprobs, entropy = _clean(ref_logprobs, mask), _clean(entropy, mask)
    per_token = -advantages * logprobs
    loss = aggregate(per_token, mask, aggregation, normalizer)
    metrics: dict[str, float] = {"policy/clip_frac": 0.0}
    loss = _regularise(loss, metrics, logprobs, mask, aggregation, normalizer, ref_logprobs, kl_coef,
                       kl_estimator, entropy, entropy_coef)
    metrics["loss/policy"] = float(loss.detach().item())
    return loss, metrics


def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor, *, clip: float | None = 0.2,
               aggregation: str = "token_mean", normalizer: float | None = None) -> tuple[Tensor, dict[str, float]]:
    """½ (V − R)², with PPO's value clipping: the new value may move at most ``clip`` from ``old_values``
    (the pessimistic max of the clipped and unclipped errors is used). ``clip=None`` disables it."""
    mask = mask.to(values.dtype)
    error = (values - returns) ** 2
    if clip is not None:
        clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
        error = torch.maximum(error, (clipped_values - returns) ** 2)
    loss = 0.5 * aggregate(error, mask, aggregation, normalizer)
    return loss, {"loss/value": float(loss.detach().item())}


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """1 − Var(R − V) / Var(R) over the masked entries (1 = perfect critic, ≤ 0 = no better than a constant)."""
    valid = mask.bool()
    if valid.sum() < 2:
        return 0.0
    target = returns[valid]
    var = target.var()
    if var <= 0:
        return 0.0
    return float((1.0 - (target - values[valid]).var() / var).item())
