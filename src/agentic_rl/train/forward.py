"""The training forward pass: logprobs (and entropy, values) only at loss positions.

The language-model head is the expensive part of a small model's forward pass (SmolLM2: 49k-token
vocabulary vs a 576-wide hidden state), and most ledger tokens (prompt, env observations) carry no loss.
So we run the decoder over the whole sequence, *gather* the hidden states that predict a mask-1 token,
and apply the head (and the value head) to those rows only.

Logprobs are computed from ``logits / temperature``: the distribution the engine sampled from, so the
sampling logprobs recorded in the ledger serve as PPO's old logprobs without another forward pass.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass
class ForwardOut:
    """``[B, L]`` tensors aligned with the input tokens: entry ``t`` belongs to token ``t`` (predicted
    from position ``t-1``); positions off the loss mask hold 0."""

    logprobs: Tensor
    entropy: Tensor | None
    values: Tensor | None


def unwrap(model: nn.Module) -> nn.Module:
    """The underlying ``*ForCausalLM`` (through a PEFT wrapper, if any)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def hidden_size(model: nn.Module) -> int:
    return int(unwrap(model).config.hidden_size)


def policy_forward(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, loss_mask: Tensor, *,
                   temperature: float = 1.0, value_head: nn.Module | None = None,
                   with_entropy: bool = True) -> ForwardOut:
    """Logprobs of the tokens under ``loss_mask`` (plus their entropies and value estimates).

    ``value_head`` maps a hidden state ``[N, H]`` to ``[N, 1]``; its value at token ``t`` is the value
    of the state *before* token ``t`` was sampled (the hidden state of position ``t-1``).
    """
    base = unwrap(model)
    head = base.get_output_embeddings()
    hidden = decoder_states(base.get_decoder(), input_ids, attention_mask)
    select = loss_mask[:, 1:] > 0  # [B, L-1]: position t-1 predicts token t
    rows = hidden[:, :-1][select]  # [N, H]
    logits = head(rows).float() / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    targets = input_ids[:, 1:][select]
    token_logprobs = log_probs.gather(-1, targets[:, None]).squeeze(-1)

    def scatter(values: Tensor) -> Tensor:
        out = torch.zeros(input_ids.shape, dtype=values.dtype, device=values.device)
        out[:, 1:][select] = values
        return out

    entropy = None
    if with_entropy:
        entropy = scatter(-(log_probs.exp() * log_probs).sum(-1))
    values = scatter(value_head(rows.detach()).squeeze(-1).float()) if value_head is not None else None
    return ForwardOut(scatter(token_logprobs), entropy, values)


#: a shared prefix shorter than this is not worth a separate decoder call
MIN_SHARED_PREFIX = 16
#: rows are packed only up to this many tokens: the mask is tokens × tokens, and attention kernels that
#: take an explicit mask may materialise scores of that size per head (a GPU micro-batch of 32k tokens)
MAX_PACKED_TOKENS = 8192


def shared_prefix_length(input_ids: Tensor, attention_mask: Tensor) -> int:
    """How many leading tokens every row of a right-padded batch has in common (0 for one row)."""
    if input_ids.shape[0] < 2:
        return 0
    limit = int(attention_mask.sum(-1).min())
    same = (input_ids[:, :limit] == input_ids[:1, :limit]).all(0)
    differs = (~same).nonzero()
    return int(differs[0]) if len(differs) else limit


@functools.cache
def _cache_keyword(decoder_type: type) -> str:
    """transformers 5 renamed the decoder's ``past_key_values`` keyword to ``cache``; accept both."""
    return "cache" if "cache" in inspect.signature(decoder_type.forward).parameters else "past_key_values"


def decoder_states(decoder: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """The decoder's last hidden states ``[B, L, H]`` for a right-padded batch (padding positions hold
    arbitrary states: callers read only positions under a loss mask).

    Two savings, neither of which changes a number beyond float rounding (values and gradients):

    - rows that start with the same tokens (every ledger starts with the env's system prompt; the
      samples of a GRPO group share the whole task prompt) run that prefix **once**;
    - the rest of the rows is **packed** into one sequence with a block-diagonal causal mask (each row
      sees the prefix and its own earlier tokens), so padding costs nothing: episodes of one batch
      differ in length by turns, and padding to the longest row cost up to 2.5× the real tokens
      (up to ``MAX_PACKED_TOKENS``; a longer batch runs its rows padded).
    Gradients flow through the shared prefix (summed over the rows) as in the per-row forward.
    """
    batch, width = input_ids.shape
    lengths = [int(n) for n in attention_mask.sum(-1)]
    if batch == 1 and lengths[0] == width:  # nothing to share, nothing padded
        return decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    # every row keeps at least one token of its own; a short prefix saves less than the extra call costs
    shared = min(shared_prefix_length(input_ids, attention_mask), min(lengths) - 1)
    shared = shared if shared >= MIN_SHARED_PREFIX else 0
    own = [n - shared for n in lengths]
    if sum(own) > MAX_PACKED_TOKENS:  # the packed mask grows with the square of the length
        return _padded_states(decoder, input_ids, attention_mask, shared)
    device = input_ids.device
    tokens = torch.cat([input_ids[row, shared:n] for row, n in enumerate(lengths)])[None]
    positions = torch.cat([torch.arange(shared, n, device=device) for n in lengths])
    segment = torch.repeat_interleave(torch.arange(batch, device=device), torch.tensor(own, device=device))
    visible = (segment[:, None] == segment[None, :]) & (positions[:, None] >= positions[None, :])
    visible = torch.cat([visible.new_ones(len(positions), shared), visible], dim=1)
    dtype = next(decoder.parameters()).dtype
    # additive form: both the SDPA and the eager attention of HF models take it as given
    mask = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill_(~visible, torch.finfo(dtype).min)
    kwargs: dict = {"attention_mask": mask[None, None], "position_ids": positions[None]}
    prefix_states = []
    if shared:
        prefix, cache_kwargs = _run_prefix(decoder, input_ids[:1, :shared])
        prefix_states = [prefix[0]]
        kwargs.update(cache_kwargs)
    packed = decoder(input_ids=tokens, **kwargs).last_hidden_state[0]
    # where token t of row b lives in [prefix states; packed states] (padding reads position 0)
    index = torch.zeros(batch, width, dtype=torch.long, device=device)
    start = shared
    for row, n in enumerate(lengths):
        index[row, :shared] = torch.arange(shared, device=device)
        index[row, shared:n] = torch.arange(start, start + own[row], device=device)
        start += own[row]
    states = torch.cat([*prefix_states, packed])
    return states[index.flatten()].view(batch, width, -1)


def _padded_states(decoder: nn.Module, input_ids: Tensor, attention_mask: Tensor, shared: int) -> Tensor:
    """The unpacked path: the shared prefix once (its keys/values repeated over the rows), then the
    right-padded rest of every row."""
    if not shared:
        return decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    prefix, cache_kwargs = _run_prefix(decoder, input_ids[:1, :shared])
    cache_kwargs[_cache_keyword(type(decoder))].batch_repeat_interleave(input_ids.shape[0])
    rest = decoder(input_ids=input_ids[:, shared:], attention_mask=attention_mask, **cache_kwargs).last_hidden_state
    return torch.cat([prefix.expand(input_ids.shape[0], -1, -1), rest], dim=1)


def _run_prefix(decoder: nn.Module, prefix_ids: Tensor) -> tuple[Tensor, dict]:
    """Run the shared prefix (``[1, P]``) once: its hidden states ``[1, P, H]`` and the keyword arguments
    that let the next decoder call attend to its cached keys/values."""
    from transformers import DynamicCache

    cache = DynamicCache()
    cache_kwargs = {"use_cache": True, _cache_keyword(type(decoder)): cache}
    return decoder(input_ids=prefix_ids, **cache_kwargs).last_hidden_state, cache_kwargs


class ValueHead(nn.Module):
    """The critic for ``gae``: one linear layer on the policy's last hidden state (shared trunk).

    A separate critic model would double memory and compute on CPU; a head on the policy's features is
    the cheap choice (the value loss, weighted by ``vf_coef``, also shapes the trunk). Initialised to 0
    so early advantages equal the returns rather than noise.
    """

    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, states: Tensor) -> Tensor:
        return self.linear(states.float())


class Reference:
    """The KL reference policy: for a PEFT model, the same model with its adapter disabled (no second
    copy); otherwise a frozen copy of the initial weights, made once."""

    def __init__(self, model: nn.Module, frozen_copy: nn.Module | None = None):
        self.model = model
        self.copy = frozen_copy
        if self.copy is None and not hasattr(model, "disable_adapter"):
            import copy

            self.copy = copy.deepcopy(model).eval()
        if self.copy is not None:
            for param in self.copy.parameters():
                param.requires_grad_(False)

    @contextlib.contextmanager
    def _active(self) -> Iterator[nn.Module]:
        if self.copy is not None:
            yield self.copy
        else:
            with self.model.disable_adapter():
                yield self.model

    @torch.no_grad()
    def logprobs(self, input_ids: Tensor, attention_mask: Tensor, loss_mask: Tensor, temperature: float) -> Tensor:
        with self._active() as model:
            return policy_forward(model, input_ids, attention_mask, loss_mask, temperature=temperature,
                                  with_entropy=False).logprobs
