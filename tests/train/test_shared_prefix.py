"""The training forward runs a prefix common to every row once and packs the rest of the rows without
padding; neither may change a number: values and gradients equal one forward pass per row."""

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


def _run_per_row(model, ids, attention, loss_mask):
    """The reference: each row alone, unpadded (a one-row batch takes the plain decoder call)."""
    model.zero_grad(set_to_none=True)
    logprobs, entropy = torch.zeros(ids.shape), torch.zeros(ids.shape)
    for row in range(ids.shape[0]):
        n = int(attention[row].sum())
        out = policy_forward(model, ids[row:row + 1, :n], attention[row:row + 1, :n], loss_mask[row:row + 1, :n],
                             temperature=0.8)
        (out.logprobs * loss_mask[row:row + 1, :n]).sum().backward()
        logprobs[row, :n], entropy[row, :n] = out.logprobs[0].detach(), out.entropy[0].detach()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logprobs, entropy, grads


@pytest.mark.parametrize(("min_shared", "max_packed"), [(16, 8192), (10**9, 8192), (16, 8), (10**9, 8)],
                         ids=["shared-prefix+packed", "packed-only", "shared-prefix+padded", "padded"])
def test_batched_forward_equals_one_forward_per_row_in_values_and_gradients(model, monkeypatch, min_shared,
                                                                            max_packed):
    ids, attention, loss_mask = _batch(model.config.vocab_size)
    assert shared_prefix_length(ids, attention) >= 24
    monkeypatch.setattr(forward, "MIN_SHARED_PREFIX", min_shared)
    monkeypatch.setattr(forward, "MAX_PACKED_TOKENS", max_packed)  # beyond it: padded rows, no packing
    batched, batched_grads = _run(model, ids, attention, loss_mask)
    logprobs, entropy, grads = _run_per_row(model, ids, attention, loss_mask)
    torch.testing.assert_close(batched.logprobs, logprobs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched.entropy, entropy, atol=1e-5, rtol=1e-5)
    assert batched_grads.keys() == grads.keys() and grads
    for name, grad in grads.items():
        torch.testing.assert_close(batched_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_packed_rows_do_not_see_each_other(model):
    """Changing one row's tokens leaves every other row's logprobs untouched (no leak through packing)."""
    ids, attention, loss_mask = _batch(model.config.vocab_size)
    with torch.no_grad():
        before = policy_forward(model, ids, attention, loss_mask).logprobs
        changed = ids.clone()
        changed[1, 30:33] = (changed[1, 30:33] + 1) % model.config.vocab_size
        after = policy_forward(model, changed, attention, loss_mask).logprobs
    torch.testing.assert_close(after[[0, 2]], before[[0, 2]], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(after[1], before[1])


def test_shared_prefix_length_stops_at_the_first_difference_and_the_shortest_row():
    ids = torch.tensor([[1, 2, 3, 4, 0], [1, 2, 3, 5, 6], [1, 2, 3, 4, 7]])
    attention = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    assert shared_prefix_length(ids, attention) == 3
    assert shared_prefix_length(ids[[0, 2]], attention[[0, 2]]) == 4  # row 0 ends there (padding after)
    assert shared_prefix_length(ids[:1], attention[:1]) == 0  # one row: nothing to share
