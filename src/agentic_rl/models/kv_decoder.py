"""A Llama-family forward pass with a persistent per-row KV cache and *ragged* steps.

Why not ``model.generate``: a multi-turn rollout needs (a) the KV cache of an episode to survive
between turns (append the observation tokens, never re-prefill the conversation), (b) rows that are
at different lengths, some prefilling an observation while others decode one token, and (c) rows
that join and leave the batch as episodes start and end. This module does exactly that and nothing
else, in plain torch:

- weights are read from the HF model (LoRA deltas merged in) into fused matrices (q|k|v, gate|up) —
  fewer, larger matmuls; :meth:`KVDecoder.sync` re-reads them only when a parameter changed;
- the cache is one preallocated tensor per layer, ``[rows, kv_heads, capacity, head_dim]``, grown by
  doubling up to ``max_context``; row ``r`` holds its tokens at positions ``0 .. length[r]-1``;
- a step takes any set of rows, each with one or more new tokens; all tokens go through the linear
  layers as one flat batch; single-token rows share one batched attention over the contiguous row
  range they span (rows in that range that are not stepping cost a few wasted attention FLOPs but no
  cache copies); multi-token rows (prefills) attend one by one;
- only the last position of each row reaches the final norm (callers apply the LM head to what they
  need — the 49k-vocab head is the single most expensive matrix).

Supported: decoder-only models with the Llama module layout (``llama``, ``mistral``, ``qwen2``;
SmolLM2 is ``llama``). Others raise ``NotImplementedError`` naming the model type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")


def effective_weight(module: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight, bias) of a Linear, with any active, unmerged peft LoRA delta added."""
    base = getattr(module, "base_layer", None)
    if base is None:
        return module.weight, module.bias
    weight = base.weight
    if not getattr(module, "merged", False) and not getattr(module, "disable_adapters", False):
        for name in module.active_adapters:
            if name in getattr(module, "lora_A", {}):
                weight = weight + module.get_delta_weight(name)
    return weight, base.bias


def _cat_bias(biases: list[torch.Tensor | None], weights: list[torch.Tensor]) -> torch.Tensor | None:
    if all(b is None for b in biases):
        return None
    return torch.cat([b if b is not None else w.new_zeros(w.shape[0]) for b, w in zip(biases, weights, strict=True)])


class KVDecoder:
    """Ragged-batch forward with a persistent KV cache for a Llama-family causal LM.

    ``model`` is the HF ``*ForCausalLM`` (possibly peft-wrapped). The decoder owns ``capacity`` cache
    rows; callers map their sequences to rows. Not thread-safe.
    """

    def __init__(self, model: Any, capacity: int, max_context: int, initial_length: int = 256):
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        config = base.config
        model_type = getattr(config, "model_type", "?")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise NotImplementedError(f"KVDecoder supports model types {SUPPORTED_MODEL_TYPES}; got {model_type!r}")
        if getattr(config, "hidden_act", "silu") != "silu":
            raise NotImplementedError(f"KVDecoder expects silu MLPs, got {config.hidden_act!r}")
        self.model = model
        self.base = base
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = getattr(config, "num_key_value_heads", None) or self.num_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.group = self.num_heads // self.num_kv_heads
        self.eps = config.rms_norm_eps
        self.scale = self.head_dim ** -0.5
        self.capacity = capacity
        self.max_context = max_context
        param = next(base.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.num_layers = len(base.model.layers)
        self.lengths = [0] * capacity
        self._alloc_len = min(initial_length, max_context)
        shape = (capacity, self.num_kv_heads, self._alloc_len, self.head_dim)
        with torch.inference_mode():  # cache tensors are only ever touched in inference mode
            self.k_cache = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(self.num_layers)]
            self.v_cache = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(self.num_layers)]
        self._fingerprint: tuple = ()
        self.layers: list[dict[str, Any]] = []
        self.sync()

    # -- weights -------------------------------------------------------------------------------
    def _current_fingerprint(self) -> tuple:
        return tuple((id(p), p._version) for p in self.model.parameters())

    @torch.no_grad()
    def sync(self, force: bool = False) -> bool:
        """Re-read the weights if any parameter changed since the last read. Returns True if it did."""
        fingerprint = self._current_fingerprint()
        if fingerprint == self._fingerprint and not force:
            return False
        layers = []
        for layer in self.base.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv = [effective_weight(attn.q_proj), effective_weight(attn.k_proj), effective_weight(attn.v_proj)]
            gate_up = [effective_weight(mlp.gate_proj), effective_weight(mlp.up_proj)]
            o_w, o_b = effective_weight(attn.o_proj)
            d_w, d_b = effective_weight(mlp.down_proj)
            layers.append({
                "ln1": layer.input_layernorm.weight.detach(),
                "ln2": layer.post_attention_layernorm.weight.detach(),
                "qkv": torch.cat([w for w, _ in qkv]).detach().contiguous(),
                "qkv_b": _cat_bias([b for _, b in qkv], [w for w, _ in qkv]),
                "o": o_w.detach().contiguous(), "o_b": o_b,
                "gate_up": torch.cat([w for w, _ in gate_up]).detach().contiguous(),
                "gate_up_b": _cat_bias([b for _, b in gate_up], [w for w, _ in gate_up]),
                "down": d_w.detach().contiguous(), "down_b": d_b,
            })
        self.layers = layers
        self.embed = self.base.model.embed_tokens.weight.detach()
        self.norm = self.base.model.norm.weight.detach()
        self.lm_head, self.lm_head_b = effective_weight(self.base.lm_head)
        self.lm_head = self.lm_head.detach()
        self.rotary = self.base.model.rotary_emb
        self._fingerprint = fingerprint
        return True

    # -- cache rows ----------------------------------------------------------------------------
    def _ensure_length(self, needed: int) -> None:
        if needed <= self._alloc_len:
            return
        if needed > self.max_context:
            raise ValueError(f"context of {needed} tokens exceeds max_context={self.max_context}")
        new_len = min(self.max_context, max(needed, 2 * self._alloc_len))
        for cache in (self.k_cache, self.v_cache):
            for i, old in enumerate(cache):
                grown = old.new_zeros((self.capacity, self.num_kv_heads, new_len, self.head_dim))
                grown[:, :, : self._alloc_len] = old
                cache[i] = grown
        self._alloc_len = new_len

    @torch.inference_mode()
    def copy_row(self, src: int, dst: int, length: int | None = None) -> None:
        """Make row ``dst`` hold the first ``length`` (default: all) cached tokens of row ``src``."""
        n = self.lengths[src] if length is None else length
        for cache in (self.k_cache, self.v_cache):
            for layer in cache:
                layer[dst, :, :n] = layer[src, :, :n]
        self.lengths[dst] = n

    def reset_row(self, row: int) -> None:
        self.lengths[row] = 0

    # -- forward -------------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, rows: Sequence[int], chunks: Sequence[Sequence[int]]) -> torch.Tensor:
        """Append ``chunks[i]`` (≥1 token ids) to row ``rows[i]``; return the final-normed hidden state
        at each row's last new token, ``[len(rows), hidden]``."""
        assert len(rows) == len(chunks) and all(len(c) for c in chunks)
        sizes = [len(c) for c in chunks]
        self._ensure_length(max(self.lengths[r] + n for r, n in zip(rows, sizes, strict=True)))
        dev = self.device
        flat = torch.tensor([t for c in chunks for t in c], device=dev)
        row_of = torch.tensor([r for r, n in zip(rows, sizes, strict=True) for _ in range(n)], device=dev)
        pos = torch.tensor([self.lengths[r] + j for r, n in zip(rows, sizes, strict=True) for j in range(n)], device=dev)
        x = F.embedding(flat, self.embed)
        cos, sin = self.rotary(x[None], pos[None])
        cos, sin = cos[0, :, None, :], sin[0, :, None, :]
        plan = self._attention_plan(rows, sizes)
        hq, hk, d = self.num_heads, self.num_kv_heads, self.head_dim
        for li, w in enumerate(self.layers):
            h = F.rms_norm(x, (x.shape[-1],), w["ln1"], self.eps)
            qkv = F.linear(h, w["qkv"], w["qkv_b"])
            q = _rope(qkv[:, : hq * d].view(-1, hq, d), cos, sin)
            k = _rope(qkv[:, hq * d: (hq + hk) * d].view(-1, hk, d), cos, sin)
            v = qkv[:, (hq + hk) * d:].view(-1, hk, d)
            self.k_cache[li][row_of, :, pos] = k
            self.v_cache[li][row_of, :, pos] = v
            attn = self._attend(li, q, plan)
            x = x + F.linear(attn.view(-1, hq * d), w["o"], w["o_b"])
            h = F.rms_norm(x, (x.shape[-1],), w["ln2"], self.eps)
            gate, up = F.linear(h, w["gate_up"], w["gate_up_b"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, w["down"], w["down_b"])
        for r, n in zip(rows, sizes, strict=True):
            self.lengths[r] += n
        last = torch.tensor(plan["last"], device=dev)
        return F.rms_norm(x[last], (x.shape[-1],), self.norm, self.eps)

    def _attention_plan(self, rows: Sequence[int], sizes: Sequence[int]) -> dict[str, Any]:
        """Index bookkeeping shared by all layers of one step."""
        offsets, total = [], 0
        for n in sizes:
            offsets.append(total)
            total += n
        single = [i for i, n in enumerate(sizes) if n == 1]
        plan: dict[str, Any] = {"last": [o + n - 1 for o, n in zip(offsets, sizes, strict=True)], "multi": []}
        if single:
            srows = [rows[i] for i in single]
            lo, hi = min(srows), max(srows) + 1
            lengths = [max(self.lengths[r], 1) for r in range(lo, hi)]
            for i in single:
                lengths[rows[i] - lo] = self.lengths[rows[i]] + 1
            t_max = max(lengths)
            valid = torch.arange(t_max, device=self.device)[None, :] < torch.tensor(lengths, device=self.device)[:, None]
            dense = srows == list(range(lo, hi))
            plan["single"] = {
                "tokens": torch.tensor([offsets[i] for i in single], device=self.device),
                "slots": None if dense else torch.tensor([r - lo for r in srows], device=self.device),
                "lo": lo, "hi": hi, "t_max": t_max, "mask": valid[:, None, None, :],
            }
        for i, n in enumerate(sizes):
            if n > 1:
                start = self.lengths[rows[i]]
                keys = torch.arange(start + n, device=self.device)
                query_pos = torch.arange(start, start + n, device=self.device)
                mask = keys[None, :] <= query_pos[:, None]  # causal, offset by what is cached
                plan["multi"].append((rows[i], offsets[i], n, start + n, mask))
        return plan

    def _attend(self, li: int, q: torch.Tensor, plan: dict[str, Any]) -> torch.Tensor:
        hk, g, d = self.num_kv_heads, self.group, self.head_dim
        out = torch.empty_like(q)
        single = plan.get("single")
        if single is not None:
            lo, hi, t_max = single["lo"], single["hi"], single["t_max"]
            qs = q[single["tokens"]].view(-1, hk, g, d)
            if single["slots"] is not None:
                full = qs.new_zeros((hi - lo, hk, g, d))
                full[single["slots"]] = qs
                qs = full
            keys = self.k_cache[li][lo:hi, :, :t_max]
            values = self.v_cache[li][lo:hi, :, :t_max]
            # the g query heads that share a kv head act as g queries of one sequence: no kv expansion
            att = F.scaled_dot_product_attention(qs, keys, values, attn_mask=single["mask"], scale=self.scale)
            if single["slots"] is not None:
                att = att[single["slots"]]
            out[single["tokens"]] = att.reshape(-1, hk * g, d)
        for row, offset, n, total, mask in plan["multi"]:
            qm = q[offset: offset + n].view(n, hk, g, d).permute(1, 2, 0, 3).reshape(1, hk * g, n, d)
            keys = self.k_cache[li][row: row + 1, :, :total]
            values = self.v_cache[li][row: row + 1, :, :total]
            att = F.scaled_dot_product_attention(qm, keys, values, attn_mask=mask, scale=self.scale, enable_gqa=True)
            out[offset: offset + n] = att[0].transpose(0, 1)
        return out

    @torch.inference_mode()
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM-head logits (float32) for final-normed hidden states ``[n, hidden]``."""
        return F.linear(hidden, self.lm_head, self.lm_head_b).float()


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
