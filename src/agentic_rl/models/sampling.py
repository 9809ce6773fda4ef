"""Token sampling: temperature, nucleus (top-p), greedy — and the logprob that gets recorded.

The recorded logprob of a sampled token is ``log_softmax(logits / temperature)`` over the *full*
vocabulary (top-p only restricts which tokens can be drawn). That is exactly what
:func:`agentic_rl.models.logprobs.sequence_logprobs` recomputes with the same temperature, so PPO/GRPO
ratios start at 1. Greedy rows record the temperature-1 logprob of the argmax.
"""

from __future__ import annotations

import torch


def sample_tokens(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, greedy: torch.Tensor,
                  generator: torch.Generator | None = None,
                  uniforms: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row.

    ``logits`` ``[n, vocab]`` (float32); ``temperature``, ``top_p`` ``[n]`` floats; ``greedy`` ``[n]`` bool.
    ``uniforms`` ``[n]`` in [0, 1): when given, row i draws by inverting its CDF at ``uniforms[i]`` (so a
    row's draw does not depend on which other rows share the batch); else ``torch.multinomial``.
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
        if uniforms is not None:
            cdf = probs.cumsum(dim=-1)
            target = uniforms[rows].to(cdf.dtype)[:, None] * cdf[:, -1:]
            drawn = torch.searchsorted(cdf, target, right=True).squeeze(1).clamp_max(probs.shape[1] - 1)
            tokens[rows] = drawn
        else:
            tokens[rows] = torch.multinomial(probs, 1, generator=generator).squeeze(1)
    return tokens, logp.gather(1, tokens[:, None]).squeeze(1)


def _top_p_filter(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Zero every token outside the smallest set whose probability mass reaches ``top_p`` (per row)."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p[:, None], 0.0)
    return torch.zeros_like(probs).scatter(1, order, sorted_probs)


_MASK64 = (1 << 64) - 1


def counter_uniform(*keys: int) -> float:
    """A uniform number in [0, 1) that is a pure function of ``keys`` (splitmix64 over the keys)."""
    state = 0x9E3779B97F4A7C15
    for key in keys:
        state = (state + (key & _MASK64) + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        state = z ^ (z >> 31)
    return (state >> 11) / float(1 << 53)
