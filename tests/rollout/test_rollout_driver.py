"""The multi-turn driver: ledger masks and rendering, logprobs, memory, failures, groups, determinism."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.agent.actions import tool_call
from agentic_rl.agent.prompt import check_ledger, render_messages
from agentic_rl.models import sequence_logprobs
from agentic_rl.rollout import SamplingParams, load_jsonl, rollout, save_jsonl

SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=12, seed=0)


def test_masks_are_one_exactly_on_sampled_tokens(engine, echo_env, make_tasks):
    trajs = rollout(engine, echo_env, make_tasks(3), group_size=2, sampling=SAMPLING, max_turns=3)
    assert len(trajs) == 6
    eot = engine.format.eot_id
    for traj in trajs:
        assert traj.termination == "truncated" and traj.num_turns == 3  # random model: no valid answer
        seg = traj.segments[0]
        seg.check()
        masked = [t for t, m in zip(seg.token_ids, seg.loss_mask, strict=True) if m]
        sampled = [t for turn in traj.turns for t in turn.token_ids]
        assert masked == sampled
        for turn in traj.turns:  # every turn ends with the end-of-turn token: sampled (mask 1) or forced (0)
            _, start, end = seg.turn_spans[traj.turns.index(turn)]
            assert seg.token_ids[start:end] == turn.token_ids
            assert seg.token_ids[end - 1] == eot or (seg.token_ids[end] == eot and seg.loss_mask[end] == 0)


def test_ledger_equals_the_rendered_conversation(engine, echo_env, make_tasks):
    traj = rollout(engine, echo_env, make_tasks(1), sampling=SAMPLING, max_turns=4)[0]
    assert traj.num_turns == 4
    messages = render_messages(traj.metadata["system_prompt"], [(t.observation, t.action) for t in traj.turns])
    seg = traj.segments[0]
    spans = [(2 + 2 * i, start, end) for i, start, end in seg.turn_spans]  # system, then user/assistant pairs
    check_ledger(engine.tokenizer, seg.token_ids, messages, spans, add_generation_prompt=False)
    assert traj.turns[1].observation.startswith("Error:")  # garbage actions are answered, not raised
    assert traj.turns[0].reward_terms == {"invalid_action": -0.1}


def test_sampling_logprobs_equal_a_fresh_forward_pass(engine, tiny_policy, echo_env, make_tasks):
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=10, seed=1)
    traj = rollout(engine, echo_env, make_tasks(1), sampling=sampling, max_turns=3)[0]
    seg = traj.segments[0]
    ids = torch.tensor([seg.token_ids])
    mask = torch.tensor([seg.loss_mask])
    with torch.no_grad():
        logprobs, entropy = sequence_logprobs(tiny_policy.model, ids, temperature=0.7, positions_mask=mask)
    got = logprobs[0][mask[0].bool()]
    expected = torch.tensor([lp for lp, m in zip(seg.logprobs, seg.loss_mask, strict=True) if m])
    assert len(expected) == traj.num_sampled_tokens > 0
    torch.testing.assert_close(got, expected, atol=2e-4, rtol=1e-4)
    assert bool((entropy[0][mask[0].bool()] > 0).all())


def test_group_shares_one_prefill(engine, echo_env, make_tasks):
    before = dict(engine.stats)
    trajs = rollout(engine, echo_env, make_tasks(1), group_size=4, sampling=SAMPLING, max_turns=1)
    prompt_len = len(trajs[0].segments[0].token_ids) - len(trajs[0].turns[0].token_ids) - 2  # eot? + "\n"
    prefilled = engine.stats["prefill_tokens"] - before["prefill_tokens"]
    assert engine.stats["shared_prefills"] - before["shared_prefills"] == 1
    assert {t.group for t in trajs} == {trajs[0].group}
    first = {tuple(t.segments[0].token_ids[:10]) for t in trajs}
    assert len(first) == 1
    assert prefilled < 2 * prompt_len  # once, not four times
    assert len({tuple(t.turns[0].token_ids) for t in trajs}) > 1  # members still sample independently


def test_different_tasks_share_their_common_header_prefill(engine, tiny_policy, echo_env, make_tasks):
    before = dict(engine.stats)
    sampling = SamplingParams(temperature=0.7, max_new_tokens=6, seed=2)
    trajs = rollout(engine, echo_env, make_tasks(3), group_size=2, sampling=sampling, max_turns=1)
    prompts = [len(t.segments[0].token_ids) - len(t.turns[0].token_ids) for t in trajs[::2]]
    prefilled = engine.stats["prefill_tokens"] - before["prefill_tokens"]
    assert engine.stats["shared_prefills"] - before["shared_prefills"] == 4  # the header once, 3 group prompts
    assert prefilled < sum(prompts) - 2 * 16  # the system prompt and template were fed once, not three times
    for traj in trajs:  # and what was sampled is still exactly what the model gives the whole ledger
        seg = traj.segments[0]
        mask = torch.tensor([seg.loss_mask])
        with torch.no_grad():
            logprobs, _ = sequence_logprobs(tiny_policy.model, torch.tensor([seg.token_ids]), temperature=0.7,
                                            positions_mask=mask)
        expected = torch.tensor([lp for lp, m in zip(seg.logprobs, seg.loss_mask, strict=True) if m])
        torch.testing.assert_close(logprobs[0][mask[0].bool()], expected, atol=2e-4, rtol=1e-4)


def test_env_crash_ends_only_that_episode(engine, echo_env, make_tasks):
    tasks = make_tasks(4, crash={1: 2})
    trajs = rollout(engine, echo_env, tasks, sampling=SAMPLING, max_turns=3)
    assert [t.task_id for t in trajs] == [t.id for t in tasks]
    crashed = trajs[1]
    assert crashed.termination == "error:env_error" and crashed.is_error and not crashed.success
    assert crashed.num_turns == 2 and "boom" in crashed.metadata["error"]
    assert all(t.termination == "truncated" and t.num_turns == 3 for i, t in enumerate(trajs) if i != 1)


def test_memory_budget_rebuilds_the_context(engine, echo_env, make_tasks):
    budget = 220
    traj = rollout(engine, echo_env, make_tasks(1), sampling=SAMPLING, max_turns=6, memory_budget=budget)[0]
    assert traj.context_rebuilds >= 1 and len(traj.segments) == traj.context_rebuilds + 1
    later = engine.format.decode(traj.segments[1].token_ids)
    assert "earlier turns omitted]" in later and "Question 0" in later  # task prompt kept, with the note
    for seg in traj.segments:
        seg.check()
        assert len(seg.token_ids) <= budget + 2  # + the closing end-of-turn glue
    assert sum(sum(s.loss_mask) for s in traj.segments) == sum(len(t.token_ids) for t in traj.turns)


def test_epsilon_forces_admissible_actions_with_mask_zero(engine, echo_env, make_tasks):
    trajs = rollout(engine, echo_env, make_tasks(2), sampling=SAMPLING, epsilon=1.0, max_turns=4)
    for traj in trajs:
        assert all(t.forced for t in traj.turns)
        assert sum(traj.segments[0].loss_mask) == 0
        assert traj.turns[-1].action.startswith("<answer>") or traj.termination == "truncated"
    assert any(t.success for t in trajs) or all(t.turns[0].action.startswith("<tool>") for t in trajs)


def test_greedy_rollouts_are_deterministic(engine, echo_env, make_tasks):
    greedy = SamplingParams(greedy=True, max_new_tokens=8)
    first = rollout(engine, echo_env, make_tasks(3), group_size=2, sampling=greedy, max_turns=2)
    second = rollout(engine, echo_env, make_tasks(3), group_size=2, sampling=greedy, max_turns=2)
    assert [t.segments[0].token_ids for t in first] == [t.segments[0].token_ids for t in second]
    assert first[0].segments[0].token_ids == first[1].segments[0].token_ids  # a greedy group agrees


def test_trajectories_round_trip_through_jsonl(engine, echo_env, make_tasks, tmp_path):
    trajs = rollout(engine, echo_env, make_tasks(2, crash={0: 1}), sampling=SAMPLING, max_turns=2)
    save_jsonl(trajs, tmp_path / "t.jsonl")
    loaded = load_jsonl(tmp_path / "t.jsonl")
    assert [t.to_dict() for t in loaded] == [t.to_dict() for t in trajs]
    assert loaded[0].segments[0].turn_spans == trajs[0].segments[0].turn_spans


def test_prefixes_are_forced_then_the_policy_samples(engine, echo_env, make_tasks):
    prefix = [tool_call("echo", {"text": "one"}), tool_call("echo", {"text": "two"})]
    trajs = rollout(engine, echo_env, make_tasks(2), group_size=3, sampling=SAMPLING, max_turns=4,
                    prefixes=[prefix, []])
    guided, free = trajs[:3], trajs[3:]
    for traj in guided:
        assert [t.action for t in traj.turns[:2]] == prefix and all(t.forced for t in traj.turns[:2])
        assert traj.turns[1].observation == "echo: one"  # the env really played the forced actions
        assert traj.metadata["guided_turns"] == 2
        assert not any(t.forced for t in traj.turns[2:]) and traj.num_turns > 2
        seg = traj.segments[0]
        seg.check()
        masked = [t for t, m in zip(seg.token_ids, seg.loss_mask, strict=True) if m]
        assert masked == [t for turn in traj.turns[2:] for t in turn.token_ids]  # trained on its own turns only
    assert all(tr.metadata["guided_turns"] == 0 and not tr.turns[0].forced for tr in free)


def test_prefixes_must_match_the_tasks(engine, echo_env, make_tasks):
    with pytest.raises(ValueError, match="prefixes has 1 entries for 2 tasks"):
        rollout(engine, echo_env, make_tasks(2), sampling=SAMPLING, prefixes=[[]])
