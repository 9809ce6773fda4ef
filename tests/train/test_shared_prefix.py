"""The training forward runs a prefix common to every row once; it must not change a single number."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.train import forward
from agentic_rl.train.forward import policy_forward, shared_prefix_length


@pytest.fixture(scope="module")
def model(tiny_model_path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).train()


def _batch(vocab: int):
    g = torch.Generator().manual_seed(3)
    prefix = torch.randint(5, vocab, (24,), generator=g)
    lengths = [40, 33, 52]
    rows = [torch.cat([prefix, torch.randint(5, vocab, (n - 24,), generator=g)]) for n in lengths]
    ids = torch.zeros(len(rows), max(lengths), dtype=torch.long)
    attention = torch.zeros_like(ids)
    loss_mask = torch.zeros(ids.shape)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        attention[i, : len(row)] = 1
        loss_mask[i, 20: len(row)] = 1  # loss starts inside the shared prefix, as when answers share tokens
    return ids, attention, loss_mask


def _run(model, ids, attention, loss_mask):
    model.zero_grad(set_to_none=True)
    out = policy_forward(model, ids, attention, loss_mask, temperature=0.8)
    (out.logprobs * loss_mask).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


def test_shared_prefix_forward_equals_the_plain_forward_in_values_and_gradients(model, monkeypatch):
    ids, attention, loss_mask = _batch(model.config.vocab_size)
    assert shared_prefix_length(ids, attention) >= 24
    shared, shared_grads = _run(model, ids, attention, loss_mask)
    monkeypatch.setattr(forward, "MIN_SHARED_PREFIX", 10**9)  # the plain per-row forward
    plain, plain_grads = _run(model, ids, attention, loss_mask)
    torch.testing.assert_close(shared.logprobs, plain.logprobs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shared.entropy, plain.entropy, atol=1e-5, rtol=1e-5)
    assert shared_grads.keys() == plain_grads.keys() and shared_grads
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_shared_prefix_length_stops_at_the_first_difference_and_the_shortest_row():
    ids = torch.tensor([[1, 2, 3, 4, 0], [1, 2, 3, 5, 6], [1, 2, 3, 4, 7]])
    attention = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    assert shared_prefix_length(ids, attention) == 3
    assert shared_prefix_length(ids[[0, 2]], attention[[0, 2]]) == 4  # row 0 ends there (padding after)
    assert shared_prefix_length(ids[:1], attention[:1]) == 0  # one row: nothing to share
