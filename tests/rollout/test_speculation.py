"""Speculative decoding: drafts change how many forward passes run, never what is emitted.

Every comparison is against the same engine with ``draft_tokens=0`` (plain decoding), which the other
rollout tests check against the HF forward pass.
"""

from __future__ import annotations

import torch

from agentic_rl.models import sequence_logprobs
from agentic_rl.models.kv_decoder import KVDecoder
from agentic_rl.models.sampling import sample_tokens
from agentic_rl.rollout import RolloutEngine, SamplingParams, rollout
from agentic_rl.rollout.speculation import PromptLookup


class _Oracle:
    """Drafts what plain decoding wrote next (read from reference ledgers), with every other draft's
    second token wrong: drafts are accepted whole, in part, and run past turn ends into env tokens."""

    def __init__(self, references: list[list[int]]):
        self.references = references
        self.tokens: list[int] = []
        self.calls = 0

    def reset(self, tokens):
        self.tokens = list(tokens)

    def extend(self, tokens):
        self.tokens.extend(tokens)

    def propose(self, limit):
        n = len(self.tokens)
        ref = next((r for r in self.references if r[:n] == self.tokens and len(r) > n), None)
        if ref is None:
            return []
        draft = list(ref[n: n + limit])
        self.calls += 1
        if self.calls % 2 and len(draft) > 1:
            draft[1] = (draft[1] + 1) % 1000
        return draft


def _ledgers(trajs):
    return [seg.token_ids for t in trajs for seg in t.segments]


def _assert_same_rollouts(plain, speculative):
    for a, b in zip(plain, speculative, strict=True):
        assert [t.token_ids for t in a.turns] == [t.token_ids for t in b.turns]
        assert [s.loss_mask for s in a.segments] == [s.loss_mask for s in b.segments]
        for ta, tb in zip(a.turns, b.turns, strict=True):
            torch.testing.assert_close(torch.tensor(tb.logprobs), torch.tensor(ta.logprobs), atol=1e-4, rtol=1e-4)


def test_decoder_verifies_drafts_and_rolls_back_rejected_ones(tiny_policy):
    model = tiny_policy.model

    def hf_logits(seq, last):
        with torch.no_grad():
            return model(torch.tensor([seq])).logits[0, -last:]

    dec = KVDecoder(model, capacity=6, max_context=64, initial_length=8)
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(3, 40000, (24,), generator=g).tolist() for _ in range(6)]
    cached = [10, 6, 8, 5, 7, 3]
    dec.forward(list(range(6)), [ids[r][:n] for r, n in enumerate(cached)])
    # a ragged step: row 0's draft is the only short multi-token chunk (it attends alone), row 2 feeds a
    # prefill and wants its last 3 positions, the rest decode one token each in the batch
    chunks = [ids[0][10:14], ids[1][6:7], ids[2][8:24], ids[3][5:6], ids[4][7:8], ids[5][3:4]]
    hidden = dec.forward(list(range(6)), chunks, outputs=[4, 1, 3, 1, 1, 1])
    ends, outputs = [14, 7, 24, 6, 8, 4], [4, 1, 3, 1, 1, 1]
    expected = torch.cat([hf_logits(ids[r][:e], o) for r, (e, o) in enumerate(zip(ends, outputs, strict=True))])
    torch.testing.assert_close(dec.logits(hidden), expected, atol=1e-4, rtol=1e-4)
    # row 0's last two draft tokens were rejected; then rows 0 and 1 verify drafts in the padded batch
    dec.truncate_row(0, 12)
    hidden = dec.forward([0, 1, 3], [[77, 78, 79], ids[1][7:10], ids[3][6:7]], outputs=[3, 3, 1])
    expected = torch.cat([hf_logits(ids[0][:12] + [77, 78, 79], 3), hf_logits(ids[1][:10], 3), hf_logits(ids[3][:7], 1)])
    torch.testing.assert_close(dec.logits(hidden), expected, atol=1e-4, rtol=1e-4)


def test_prompt_lookup_proposes_what_followed_the_latest_longest_match():
    lookup = PromptLookup(ngram_sizes=(3, 2))
    lookup.reset([5, 6, 7, 1, 2, 3, 9, 5, 6, 8, 6, 7])
    assert lookup.propose(3) == [1, 2, 3]  # "6 7" occurred once before, followed by 1 2 3
    lookup.extend([1])  # "6 7 1" now matches the 3-gram at positions 1..3
    assert lookup.propose(2) == [2, 3]
    lookup.extend([4])  # "1 4" and "7 1 4" never occurred; the tail never matches itself
    assert lookup.propose(4) == []
    lookup.reset([5, 6, 8, 5, 6])  # the latest earlier "5 6" wins
    assert lookup.propose(4) == [8, 5, 6]


def test_keeping_a_draft_token_when_the_draw_equals_it_is_exact_speculative_sampling():
    # one shared uniform per position: d is kept with probability p(d), a rejection draws p without d
    logits = torch.tensor([1.0, 0.2, -0.5, 2.0]).repeat(4000, 1)
    n = logits.shape[0]
    uniforms = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    tokens, _ = sample_tokens(logits, torch.ones(n), torch.ones(n), torch.zeros(n, dtype=torch.bool), uniforms=uniforms)
    p = torch.softmax(logits[0], dim=-1)
    draft = 0
    kept = (tokens == draft).double().mean().item()
    assert abs(kept - p[draft].item()) < 2 / n
    rejected = tokens[tokens != draft]
    residual = p.clone()
    residual[draft] = 0
    residual /= residual.sum()
    freq = torch.bincount(rejected, minlength=4).double() / len(rejected)
    torch.testing.assert_close(freq, residual.double(), atol=2e-3, rtol=0)


def test_greedy_output_is_identical_with_and_without_speculation(tiny_policy, echo_env, make_tasks):
    greedy = SamplingParams(greedy=True, max_new_tokens=24)
    plain_engine = RolloutEngine(tiny_policy, max_batch=8, draft_tokens=0)
    plain = rollout(plain_engine, echo_env, make_tasks(4), group_size=2, sampling=greedy, max_turns=3)
    engine = RolloutEngine(tiny_policy, max_batch=8, draft_tokens=4)
    speculative = rollout(engine, echo_env, make_tasks(4), group_size=2, sampling=greedy, max_turns=3)
    _assert_same_rollouts(plain, speculative)
    assert engine.stats["accepted_draft_tokens"] > 0  # prompt lookup really guessed right sometimes
    assert engine.stats["forward_calls"] < plain_engine.stats["forward_calls"]


def test_sampled_output_and_logprobs_are_exact_under_partly_wrong_drafts(tiny_policy, echo_env, make_tasks):
    sampling = SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=12, seed=5)
    plain = rollout(RolloutEngine(tiny_policy, max_batch=8, draft_tokens=0), echo_env, make_tasks(3),
                    group_size=2, sampling=sampling, max_turns=3)
    references = _ledgers(plain)
    engine = RolloutEngine(tiny_policy, max_batch=8, draft_tokens=5, drafter=lambda: _Oracle(references),
                           draft_sampled=True)
    speculative = rollout(engine, echo_env, make_tasks(3), group_size=2, sampling=sampling, max_turns=3)
    _assert_same_rollouts(plain, speculative)
    stats = engine.stats
    assert 0 < stats["accepted_draft_tokens"] < stats["draft_tokens"]  # both outcomes were exercised
    for traj in speculative:
        seg = traj.segments[0]
        masked = [t for t, m in zip(seg.token_ids, seg.loss_mask, strict=True) if m]
        assert masked == [t for turn in traj.turns for t in turn.token_ids]
        mask = torch.tensor([seg.loss_mask])
        with torch.no_grad():
            logprobs, _ = sequence_logprobs(tiny_policy.model, torch.tensor([seg.token_ids]), positions_mask=mask)
        expected = torch.tensor([lp for lp, m in zip(seg.logprobs, seg.loss_mask, strict=True) if m])
        torch.testing.assert_close(logprobs[0][mask[0].bool()], expected, atol=2e-4, rtol=1e-4)


def _turns(engine, turns):
    engine.prepare(seed=3)
    seq = engine.open(engine.format.prompt_ids("S", "Say something."))[0]
    outputs = []
    for params in turns:
        engine.generate(seq, engine.format.encode(" Go on."), params)
        while engine.has_work():
            outputs += engine.step()
    return outputs


def test_drafts_never_carry_a_turn_past_its_stop_string_or_token_limit(tiny_policy):
    plain_engine = RolloutEngine(tiny_policy, draft_tokens=0)
    fmt = plain_engine.format
    free = _turns(plain_engine, [SamplingParams(max_new_tokens=12, stop=())])[0]
    # the oracle drafts this free continuation, which runs on past the stop string and the limit below
    reference = fmt.prompt_ids("S", "Say something.") + fmt.encode(" Go on.") + free.token_ids
    stop = next(fmt.decode([t]) for t in free.token_ids[3:] if fmt.decode([t]).strip())
    for first in (SamplingParams(max_new_tokens=12, stop=(stop,)), SamplingParams(max_new_tokens=4, stop=())):
        turns = [first, SamplingParams(max_new_tokens=6, stop=())]  # the next turn reads the rolled-back cache
        plain = _turns(RolloutEngine(tiny_policy, draft_tokens=0), turns)
        engine = RolloutEngine(tiny_policy, draft_tokens=8, drafter=lambda: _Oracle([reference]), draft_sampled=True)
        speculative = _turns(engine, turns)
        assert [o.finish_reason for o in speculative] == [o.finish_reason for o in plain]
        assert plain[0].finish_reason == ("stop" if first.stop else "length") and plain[1].finish_reason == "length"
        assert [o.token_ids for o in speculative] == [o.token_ids for o in plain]
        assert speculative[0].token_ids == free.token_ids[: len(plain[0].token_ids)] and len(plain[0].token_ids) < 12
        for a, b in zip(plain, speculative, strict=True):
            torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-4, rtol=1e-4)
        assert engine.stats["accepted_draft_tokens"] > 0


class _AlwaysWrong(_Oracle):
    def propose(self, limit):
        return [(t + 1) % 1000 for t in super().propose(limit)]


def test_a_sequence_whose_drafts_fail_stops_feeding_them(tiny_policy, echo_env, make_tasks):
    sampling = SamplingParams(temperature=1.0, max_new_tokens=12, seed=5)
    plain = rollout(RolloutEngine(tiny_policy, max_batch=8, draft_tokens=0), echo_env, make_tasks(2),
                    sampling=sampling, max_turns=2)
    references = _ledgers(plain)
    engine = RolloutEngine(tiny_policy, max_batch=8, draft_tokens=4, drafter=lambda: _AlwaysWrong(references),
                           draft_sampled=True)
    speculative = rollout(engine, echo_env, make_tasks(2), sampling=sampling, max_turns=2)
    _assert_same_rollouts(plain, speculative)
    # one 4-token draft each, rejected at its first token; after that only free, unfed guesses
    assert engine.stats["draft_tokens"] == 4 * 2 and engine.stats["accepted_draft_tokens"] == 0


def test_sampled_turns_draft_only_when_asked(tiny_policy, echo_env, make_tasks):
    references = [list(range(3000))]  # never matches: only whether drafting is attempted matters
    asked = []

    class Spy(_Oracle):
        def propose(self, limit):
            asked.append(limit)
            return super().propose(limit)

    sampled, greedy = SamplingParams(temperature=1.0, max_new_tokens=6, seed=1), SamplingParams(greedy=True, max_new_tokens=6)
    rollout(RolloutEngine(tiny_policy, max_batch=8, drafter=lambda: Spy(references)), echo_env, make_tasks(2),
            sampling=sampled, max_turns=1)
    assert asked == []
    rollout(RolloutEngine(tiny_policy, max_batch=8, drafter=lambda: Spy(references)), echo_env, make_tasks(2),
            sampling=greedy, max_turns=1)
    assert asked  # greedy turns do draft
