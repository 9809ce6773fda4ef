"""One optimizer step over a minibatch, split into token-budget micro-batches with gradient accumulation.

Losses are normalised by the *minibatch* totals (token count or sequence count), so the micro-batch
losses sum to the minibatch loss: 8 micro-batches of 1 sequence give the same gradient as 1 of 8.
Guards run before ``optimizer.step()``: a non-finite loss or gradient, an exploding gradient norm or a
KL beyond its bound leaves the weights untouched (the last good state) and reports why.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from agentic_rl.algos import aggregate, explained_variance, value_loss
from agentic_rl.train.batching import Sample, collate, micro_batches
from agentic_rl.train.forward import policy_forward


@dataclass
class StepResult:
    """Metrics of one optimizer step (token-weighted means) and the guard that tripped, if any."""

    metrics: dict[str, float] = field(default_factory=dict)
    tripped: str | None = None


def _normalizer(samples: Sequence[Sample], aggregation: str) -> float:
    if aggregation == "token_mean":
        return float(sum(sum(s.loss_mask) for s in samples))
    return float(sum(1 for s in samples if any(s.loss_mask)))


def nll_loss(model: nn.Module, samples: Sequence[Sample], *, token_budget: int, pad_token_id: int,
             coef: float = 1.0, device: torch.device | str = "cpu", backward: bool = True) -> tuple[float, int]:
    """Token-mean negative log-likelihood of the mask-1 tokens of ``samples`` (SFT, replay, SFT mixing).

    With ``backward`` the gradient of ``coef × loss`` is accumulated. Returns (summed NLL, token count).
    """
    total_tokens = sum(sum(s.loss_mask) for s in samples)
    summed = 0.0
    for group in micro_batches([len(s) for s in samples], token_budget):
        batch = collate([samples[i] for i in group], pad_token_id).to(device)
        with torch.set_grad_enabled(backward):
            out = policy_forward(model, batch.input_ids, batch.attention_mask, batch.loss_mask, with_entropy=False)
            loss = aggregate(-out.logprobs, batch.loss_mask, "token_mean", normalizer=total_tokens)
            if backward:
                (coef * loss).backward()
        summed += float(loss.detach()) * total_tokens
    return summed, total_tokens


def clip_and_check(parameters: Sequence[nn.Parameter], max_grad_norm: float, grad_norm_limit: float,
                   halt_on_nan: bool) -> tuple[float, str | None]:
    """Clip gradients; return the pre-clip norm and a guard reason (``non_finite_grad``, ``grad_norm``)."""
    norm = float(torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm))
    if not math.isfinite(norm):
        return norm, "non_finite_grad" if halt_on_nan else None
    if norm > grad_norm_limit:
        return norm, "grad_norm"
    return norm, None


def policy_step(model: nn.Module, samples: Sequence[Sample], *, loss_fn: Callable, loss_kwargs: dict,
                temperature: float, token_budget: int, pad_token_id: int, value_head: nn.Module | None = None,
                vf_coef: float = 0.5, value_clip: float | None = 0.2, kl_limit: float | None = None,
                halt_on_nan: bool = True, device: torch.device | str = "cpu") -> StepResult:
    """Accumulate the gradient of the policy (+ value) loss over ``samples``; no optimizer step here.

    ``loss_kwargs`` are passed to ``loss_fn`` (clip range, aggregation, KL/entropy coefficients).
    """
    aggregation = loss_kwargs.get("aggregation", "token_mean")
    normalizer = _normalizer(samples, aggregation)
    sums: dict[str, float] = defaultdict(float)
    weight_total = 0.0
    values_all, returns_all, masks_all = [], [], []
    for group in micro_batches([len(s) for s in samples], token_budget):
        batch = collate([samples[i] for i in group], pad_token_id).to(device)
        out = policy_forward(model, batch.input_ids, batch.attention_mask, batch.loss_mask,
                             temperature=temperature, value_head=value_head,
                             with_entropy=True)
        # explored openers were not sampled: no behaviour logprob, so their ratio is 1 (plain policy gradient)
        old = torch.where(torch.isnan(batch.old_logprobs), out.logprobs.detach(), batch.old_logprobs)
        loss, metrics = loss_fn(out.logprobs, old, batch.advantages, batch.loss_mask,
                                normalizer=normalizer, ref_logprobs=batch.ref_logprobs, entropy=out.entropy,
                                **loss_kwargs)
        if value_head is not None:
            v_loss, v_metrics = value_loss(out.values, batch.old_values, batch.returns, batch.loss_mask,
                                           clip=value_clip, aggregation=aggregation, normalizer=normalizer)
            loss = loss + vf_coef * v_loss
            metrics.update(v_metrics)
            values_all.append(out.values.detach().flatten())
            returns_all.append(batch.returns.flatten())
            masks_all.append(batch.loss_mask.flatten())
        if not torch.isfinite(loss) and halt_on_nan:
            return StepResult(dict(metrics), "non_finite_loss")
        if kl_limit is not None and metrics.get("policy/kl", 0.0) > kl_limit:
            return StepResult(dict(metrics), "kl")
        loss.backward()
        weight = float(batch.loss_mask.sum())
        weight_total += weight
        for name, value in metrics.items():
            # loss terms are already normalised by the minibatch: they add up; the rest are token means
            sums[name] += value if name.startswith("loss/") else value * weight
    result = {k: (v if k.startswith("loss/") else v / max(weight_total, 1.0)) for k, v in sums.items()}
    if values_all:
        result["value/explained_var"] = explained_variance(torch.cat(values_all), torch.cat(returns_all),
                                                           torch.cat(masks_all))
    result["loss/total"] = result.get("loss/policy", 0.0) + vf_coef * result.get("loss/value", 0.0)
    return StepResult(result)


def minibatch_indices(n: int, minibatches: int, generator: torch.Generator) -> list[list[int]]:
    """A random split of ``range(n)`` into ``minibatches`` near-equal parts (drawn from ``generator``)."""
    order = torch.randperm(n, generator=generator).tolist()
    parts = max(1, min(minibatches, n))
    return [order[i::parts] for i in range(parts)]

