"""Token sampling: temperature, nucleus (top-p), greedy — and the logprob that gets recorded.

The recorded logprob of a sampled token is ``log_softmax(logits / temperature)`` over the *full*
vocabulary (top-p only restricts which tokens can be drawn). That is exactly what
:func:`agentic_rl.models.logprobs.sequence_logprobs` recomputes with the same temperature, so PPO/GRPO
ratios start at 1. Greedy rows record the temperature-1 logprob of the argmax.
"""

from __future__ import annotations

import torch


def sample_tokens(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, greedy: torch.Tensor,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row.

    ``logits`` ``[n, vocab]`` (float32); ``temperature``, ``top_p`` ``[n]`` floats; ``greedy`` ``[n]`` bool.
    Returns ``(token_ids [n] long, logprobs [n] float)``.
    """
    temperature = torch.where(greedy, torch.ones_like(temperature), temperature.clamp_min(1e-4))
    logp = torch.log_softmax(logits / temperature[:, None], dim=-1)
    tokens = logp.argmax(dim=-1)
    sampled = ~greedy
    if bool(sampled.any()):
        rows = sampled.nonzero().squeeze(1)
        probs = logp[rows].exp()
        nucleus = top_p[rows]
        if bool((nucleus < 1.0).any()):
            probs = _top_p_filter(probs, nucleus)
        tokens[rows] = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    return tokens, logp.gather(1, tokens[:, None]).squeeze(1)


def _top_p_filter(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Zero every token outside the smallest set whose probability mass reaches ``top_p`` (per row)."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p[:, None], 0.0)
    return torch.zeros_like(probs).scatter(1, order, sorted_probs)
