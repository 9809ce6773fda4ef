"""Per-token logprobs for training, computing the LM head only where they are needed."""

from __future__ import annotations

from typing import Any

import torch


def _backbone_and_head(model: Any) -> tuple[Any, Any]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(base, base.base_model_prefix, None)
    head = base.get_output_embeddings()
    if backbone is None or head is None:
        raise TypeError(f"{type(base).__name__} is not a causal LM with a backbone and an LM head")
    return backbone, head


def sequence_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      temperature: float = 1.0, positions_mask: torch.Tensor | None = None,
                      with_entropy: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprob of each token given the tokens before it, aligned with ``input_ids``.

    ``input_ids``/``attention_mask``: ``[batch, seq]``, **right**-padded (ledger segments are). Returns
    ``(logprobs, entropy)``, both ``[batch, seq]`` float32: ``logprobs[b, t] = log p(input_ids[b, t] |
    input_ids[b, :t])`` under ``softmax(logits / temperature)`` — the same rule the rollout engine
    records — and ``entropy[b, t]`` of that predictive distribution. Position 0 has no prediction (0).

    ``positions_mask`` ``[batch, seq]`` (e.g. a ledger's ``loss_mask``): only those positions are
    computed; the rest are 0. The backbone runs on every token, but the vocabulary projection (the
    most expensive matrix of a small model) runs only at the masked positions. Gradients flow when
    called outside ``torch.no_grad``.
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq], got shape {tuple(input_ids.shape)}")
    backbone, head = _backbone_and_head(model)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    wanted = torch.zeros_like(input_ids, dtype=torch.bool)
    if positions_mask is None:
        wanted[:, 1:] = True if attention_mask is None else attention_mask[:, 1:].bool()
    else:
        wanted[:, 1:] = positions_mask[:, 1:].bool()
    batch_idx, pos_idx = wanted.nonzero(as_tuple=True)
    logits = head(hidden[batch_idx, pos_idx - 1]).float() / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    picked = logp_all.gather(1, input_ids[batch_idx, pos_idx][:, None]).squeeze(1)
    logprobs = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
    logprobs = logprobs.index_put((batch_idx, pos_idx), picked)
    entropy = None
    if with_entropy:
        ent = -(logp_all.exp() * logp_all).sum(dim=-1)
        entropy = torch.zeros_like(logprobs).index_put((batch_idx, pos_idx), ent)
    return logprobs, entropy
