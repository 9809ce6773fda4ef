"""The KV-cache decoder agrees with the HF forward pass; logprob utility; sampling rules."""

from __future__ import annotations

import torch

from agentic_rl.models import load_policy, sequence_logprobs
from agentic_rl.models.kv_decoder import KVDecoder
from agentic_rl.models.sampling import sample_tokens


def _hf_last_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1]


def test_ragged_steps_match_the_hf_forward(tiny_model_path):
    model = load_policy(str(tiny_model_path)).model
    dec = KVDecoder(model, capacity=4, max_context=64, initial_length=8)  # forces the cache to grow
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(3, 40000, (20,), generator=g).tolist() for _ in range(3)]
    out = dec.logits(dec.forward([0, 2], [seqs[0][:12], seqs[2][:5]]))
    torch.testing.assert_close(out[0], _hf_last_logits(model, seqs[0][:12]), atol=1e-4, rtol=1e-4)
    # mixed step: two single-token rows with a hole (row 1 prefilling), and a prefill
    out = dec.logits(dec.forward([0, 1, 2], [[seqs[0][12]], seqs[1][:9], [seqs[2][5]]]))
    for k, ids in enumerate([seqs[0][:13], seqs[1][:9], seqs[2][:6]]):
        torch.testing.assert_close(out[k], _hf_last_logits(model, ids), atol=1e-4, rtol=1e-4)
    dec.copy_row(2, 3)
    out = dec.logits(dec.forward([3], [[7]]))
    torch.testing.assert_close(out[0], _hf_last_logits(model, seqs[2][:6] + [7]), atol=1e-4, rtol=1e-4)


def test_decoder_picks_up_changed_lora_weights(tiny_model_path):
    policy = load_policy(str(tiny_model_path), lora={"r": 4})
    dec = KVDecoder(policy.model, capacity=1, max_context=32)
    ids = [1, 9690, 198, 67, 2, 198]
    before = dec.logits(dec.forward([0], [ids]))[0]
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    assert dec.sync() and not dec.sync()  # re-read once, then nothing changed
    dec.reset_row(0)
    after = dec.logits(dec.forward([0], [ids]))[0]
    assert (after - before).abs().max() > 1e-3
    torch.testing.assert_close(after, _hf_last_logits(policy.model, ids), atol=1e-4, rtol=1e-4)


def test_sequence_logprobs_matches_full_log_softmax(tiny_model_path):
    model = load_policy(str(tiny_model_path)).model
    ids = torch.tensor([[1, 9690, 198, 67, 2, 198, 44], [1, 4093, 198, 2231, 2, 2, 2]])
    attn = torch.tensor([[1] * 7, [1] * 5 + [0, 0]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 0, 1], [0, 0, 1, 1, 0, 0, 0]])
    with torch.no_grad():
        logprobs, entropy = sequence_logprobs(model, ids, attn, temperature=2.0, positions_mask=mask)
        full = torch.log_softmax(model(ids, attention_mask=attn).logits.float() / 2.0, dim=-1)
    expected = torch.zeros_like(logprobs)
    expected[:, 1:] = full[:, :-1].gather(2, ids[:, 1:, None]).squeeze(2)
    torch.testing.assert_close(logprobs, expected * mask, atol=1e-5, rtol=1e-5)
    assert bool((entropy[mask.bool()] > 0).all()) and bool((entropy[~mask.bool()] == 0).all())


def test_top_p_never_draws_outside_the_nucleus_and_logprob_is_full_softmax():
    logits = torch.tensor([[5.0, 4.0, 0.0, -1.0]]).repeat(200, 1)
    g = torch.Generator().manual_seed(0)
    n = logits.shape[0]
    tokens, logprobs = sample_tokens(logits, torch.ones(n), torch.full((n,), 0.9), torch.zeros(n, dtype=torch.bool), g)
    assert set(tokens.tolist()) <= {0, 1} and len(set(tokens.tolist())) == 2
    full = torch.log_softmax(logits[0], dim=-1)
    torch.testing.assert_close(logprobs, full[tokens])
    greedy, _ = sample_tokens(logits, torch.ones(n), torch.ones(n), torch.ones(n, dtype=torch.bool), g)
    assert set(greedy.tolist()) == {0}
