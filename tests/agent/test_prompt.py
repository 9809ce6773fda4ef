"""Prompt rendering and the token ledger rule."""

from __future__ import annotations

import pytest

from agentic_rl.agent.actions import answer, tool_call
from agentic_rl.agent.prompt import (
    LedgerMismatchError,
    build_ledger,
    chat_format,
    check_ledger,
    render_messages,
)

OBS = ["What is 6*7?", "Result: 42"]
ACTIONS = [tool_call("calculator", {"expression": "6*7"}), answer("42")]


def _spans(seg, first_message=2):
    return [(first_message + 2 * i, start, end) for i, start, end in seg.turn_spans]


def test_sft_ledger_masks_actions_and_their_end_of_turn(tokenizer):
    seg = build_ledger(tokenizer, "You use tools.", OBS, ACTIONS)
    fmt = chat_format(tokenizer)
    rendered = fmt.messages_ids(render_messages("You use tools.", list(zip(OBS, ACTIONS, strict=True))), False)
    assert seg.token_ids == rendered
    trained = fmt.decode([t for t, m in zip(seg.token_ids, seg.loss_mask, strict=True) if m])
    assert trained == ACTIONS[0] + "<|im_end|>" + ACTIONS[1] + "<|im_end|>"


def test_pending_observation_leaves_the_ledger_at_the_assistant_header(tokenizer):
    seg = build_ledger(tokenizer, "", OBS, ACTIONS[:1])
    text = chat_format(tokenizer).decode(seg.token_ids)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant")  # SmolLM2's default system
    assert text.endswith("<|im_start|>user\nResult: 42<|im_end|>\n<|im_start|>assistant\n")


def test_sampled_ids_are_kept_and_a_missing_end_of_turn_is_forced(tokenizer):
    fmt = chat_format(tokenizer)
    canonical = fmt.encode("<answer>answer</answer>")
    pieces = fmt.encode("<answer>ans") + fmt.encode("wer</answer>")  # same text, non-canonical ids
    assert pieces != canonical and fmt.decode(pieces) == "<answer>answer</answer>"
    seg = build_ledger(tokenizer, "S", OBS[:1], ["<answer>answer</answer>"], sampled_ids=[pieces])
    _, start, end = seg.turn_spans[0]
    assert seg.token_ids[start:end] == pieces and seg.loss_mask[start:end] == [1] * len(pieces)
    assert seg.token_ids[end] == fmt.eot_id and seg.loss_mask[end] == 0
    messages = render_messages("S", [(OBS[0], "<answer>answer</answer>")])
    check_ledger(tokenizer, seg.token_ids, messages, _spans(seg), add_generation_prompt=False)


def test_mismatch_raises_with_both_token_strings(tokenizer):
    seg = build_ledger(tokenizer, "S", OBS, ACTIONS)
    messages = render_messages("S", list(zip(OBS, ACTIONS, strict=True)))
    broken = list(seg.token_ids)
    del broken[seg.turn_spans[1][1] - 2]  # drop a glue token before the second action
    with pytest.raises(LedgerMismatchError, match="ledger:.*\n.*rendering:"):
        check_ledger(tokenizer, broken, messages, [], add_generation_prompt=False)
    wrong_text = render_messages("S", [(OBS[0], ACTIONS[0]), (OBS[1], answer("41"))])
    with pytest.raises(LedgerMismatchError, match="decode"):
        check_ledger(tokenizer, seg.token_ids, wrong_text, _spans(seg), add_generation_prompt=False)


def test_build_ledger_rejects_misaligned_inputs(tokenizer):
    with pytest.raises(ValueError, match="one observation per action"):
        build_ledger(tokenizer, "S", OBS[:1], ACTIONS)
