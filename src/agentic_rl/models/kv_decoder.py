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
  cache copies); short multi-token rows (a decode token plus draft tokens to verify) join that batch,
  padded to the longest, when they are a good share of it, else attend one by one like long rows
  (prefills);
- only the last position of each row (or its last few, to verify a draft) reaches the final norm
  (callers apply the LM head to what they need — the 49k-vocab head is the single most expensive matrix);
- :meth:`KVDecoder.truncate_row` rolls a row back (rejected draft tokens).

Supported: decoder-only models with the Llama module layout (``llama``, ``mistral``, ``qwen2``;
SmolLM2 is ``llama``). Others raise ``NotImplementedError`` naming the model type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
#: chunks up to this many tokens (a decode token plus a draft to verify) may attend batched, every row in
#: the batch padded to the longest; longer ones (prefills) attend row by row, so they never widen the batch
MAX_SHORT_CHUNK = 8
#: multi-token short chunks join the batch only when at least this share of its rows has one: padding
#: 32 rows to width 5 for one draft cost +53 ms a step here, attending that row alone +8 ms (4 of 32
#: rows: +81 vs +58 ms; 8 of 32: equal; 16 of 32: +172 vs +216 ms)
MIN_WIDE_SHARE = 0.25


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

    def truncate_row(self, row: int, length: int) -> None:
        """Forget row ``row``'s cached tokens from position ``length`` on (e.g. rejected draft tokens): the
        slots stay allocated and are overwritten by the next tokens fed; attention never reads past a
        row's length."""
        assert 0 <= length <= self.lengths[row]
        self.lengths[row] = length

    # -- forward -------------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, rows: Sequence[int], chunks: Sequence[Sequence[int]],
                outputs: Sequence[int] | None = None) -> torch.Tensor:
        """Append ``chunks[i]`` (≥1 token ids) to row ``rows[i]``; return the final-normed hidden states
        of the last ``outputs[i]`` (default 1) new tokens of each row, in row order then position order,
        ``[sum(outputs), hidden]``."""
        assert len(rows) == len(chunks) and all(len(c) for c in chunks)
        sizes = [len(c) for c in chunks]
        outputs = [1] * len(sizes) if outputs is None else list(outputs)
        assert all(1 <= o <= n for o, n in zip(outputs, sizes, strict=True))
        self._ensure_length(max(self.lengths[r] + n for r, n in zip(rows, sizes, strict=True)))
        dev = self.device
        flat = torch.tensor([t for c in chunks for t in c], device=dev)
        row_of = torch.tensor([r for r, n in zip(rows, sizes, strict=True) for _ in range(n)], device=dev)
        pos = torch.tensor([self.lengths[r] + j for r, n in zip(rows, sizes, strict=True) for j in range(n)], device=dev)
        x = F.embedding(flat, self.embed)
        cos, sin = self.rotary(x[None], pos[None])
        cos, sin = cos[0, :, None, :], sin[0, :, None, :]
        plan = self._attention_plan(rows, sizes, outputs)
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
        return F.rms_norm(x[plan["out"]], (x.shape[-1],), self.norm, self.eps)

    def _attention_plan(self, rows: Sequence[int], sizes: Sequence[int], outputs: Sequence[int]) -> dict[str, Any]:
        """Index bookkeeping shared by all layers of one step."""
        offsets, total = [], 0
        for n in sizes:
            offsets.append(total)
            total += n
        dev = self.device
        out = [o + n - k for o, n, m in zip(offsets, sizes, outputs, strict=True) for k in range(m, 0, -1)]
        plan: dict[str, Any] = {"out": torch.tensor(out, device=dev), "alone": []}
        short = [i for i, n in enumerate(sizes) if n <= MAX_SHORT_CHUNK]
        if sum(sizes[i] > 1 for i in short) < MIN_WIDE_SHARE * len(short):
            short = [i for i in short if sizes[i] == 1]
        if short:
            plan["short"] = self._short_plan([rows[i] for i in short], [sizes[i] for i in short],
                                             [offsets[i] for i in short])
        batched = set(short)
        for i, n in enumerate(sizes):
            if i not in batched:
                start = self.lengths[rows[i]]
                keys = torch.arange(start + n, device=dev)
                query_pos = torch.arange(start, start + n, device=dev)
                mask = keys[None, :] <= query_pos[:, None]  # causal, offset by what is cached
                plan["alone"].append((rows[i], offsets[i], n, start + n, mask))
        return plan

    def _short_plan(self, rows: list[int], sizes: list[int], offsets: list[int]) -> dict[str, Any]:
        """Short chunks (decode tokens, drafts to verify) attend as one batch over the contiguous row range
        they span: every row gets ``width`` query slots, row ``r``'s slot ``j`` is the token at position
        ``lengths[r] + j``. Slots without a token (rows not stepping, shorter chunks) compute garbage that
        is never read; each still sees key 0, so no softmax row is empty."""
        dev = self.device
        lo, hi, width = min(rows), max(rows) + 1, max(sizes)
        t_max = max(self.lengths[r] + n for r, n in zip(rows, sizes, strict=True))
        starts = torch.tensor(self.lengths[lo:hi], device=dev)
        query_pos = starts[:, None] + torch.arange(width, device=dev)[None, :]
        mask = torch.arange(t_max, device=dev)[None, None, :] <= query_pos[:, :, None]  # [rows, width, keys]
        return {
            "tokens": torch.tensor([o + j for o, n in zip(offsets, sizes, strict=True) for j in range(n)], device=dev),
            "slots": torch.tensor([r - lo for r, n in zip(rows, sizes, strict=True) for _ in range(n)], device=dev),
            "positions": torch.tensor([j for n in sizes for j in range(n)], device=dev),
            "lo": lo, "hi": hi, "width": width, "t_max": t_max,
            # one padded query buffer for all layers: each layer fills the same slots, the rest stay 0
            "queries": torch.zeros((hi - lo, self.num_kv_heads, self.group, width, self.head_dim), device=dev,
                                   dtype=self.dtype),
            # query order within a kv head is (group member, slot): the mask repeats per group member
            "mask": mask[:, None, None].expand(-1, 1, self.group, -1, -1).reshape(hi - lo, 1, -1, t_max),
        }

    def _attend(self, li: int, q: torch.Tensor, plan: dict[str, Any]) -> torch.Tensor:
        hk, g, d = self.num_kv_heads, self.group, self.head_dim
        out = torch.empty_like(q)
        short = plan.get("short")
        if short is not None:
            lo, hi, width, t_max = short["lo"], short["hi"], short["width"], short["t_max"]
            slots, positions = short["slots"], short["positions"]
            # the g query heads that share a kv head act as g·width queries of one row: no kv expansion
            qs = short["queries"]
            qs[slots, :, :, positions] = q[short["tokens"]].view(-1, hk, g, d)
            keys = self.k_cache[li][lo:hi, :, :t_max]
            values = self.v_cache[li][lo:hi, :, :t_max]
            att = F.scaled_dot_product_attention(qs.view(hi - lo, hk, g * width, d), keys, values,
                                                 attn_mask=short["mask"], scale=self.scale)
            out[short["tokens"]] = att.view(hi - lo, hk, g, width, d)[slots, :, :, positions].reshape(-1, hk * g, d)
        for row, offset, n, total, mask in plan["alone"]:
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
