"""Episode memory under a token budget."""

from __future__ import annotations

from agentic_rl.agent.memory import fit_history, history_messages
from agentic_rl.agent.prompt import chat_format


def _episode(n):
    observations = ["Task: find the value of item 0."] + [f"result {i}: " + "x " * 10 for i in range(n)]
    actions = [f'<tool>{{"name": "lookup", "arguments": {{"item": {i}}}}}</tool>' for i in range(n)]
    return observations, actions


def test_everything_is_kept_when_it_fits(tokenizer):
    observations, actions = _episode(3)
    messages, omitted = fit_history(tokenizer, "S", observations, actions, budget=10_000)
    assert omitted == 0 and messages == history_messages("S", observations, actions, 0)


def test_oldest_turns_are_dropped_with_a_note(tokenizer):
    observations, actions = _episode(6)
    fmt = chat_format(tokenizer)
    full = len(fmt.messages_ids(history_messages("S", observations, actions, 0), True))
    budget = full - 40
    messages, omitted = fit_history(tokenizer, "S", observations, actions, budget=budget, reserve=16)
    assert omitted >= 1
    assert len(fmt.messages_ids(messages, True)) + 16 <= budget
    assert messages[0]["content"] == "S"
    assert messages[1]["content"] == f"{observations[0]}\n[{omitted} earlier turns omitted]"
    assert messages[-1]["content"] == observations[-1] and messages[2]["content"] == actions[omitted]
    fewer, _ = fit_history(tokenizer, "S", observations, actions, budget=budget, reserve=0)
    assert len(fewer) >= len(messages)  # as few turns dropped as the budget allows


def test_the_last_turn_is_kept_even_over_budget(tokenizer):
    observations, actions = _episode(4)
    messages, omitted = fit_history(tokenizer, "S", observations, actions, budget=5)
    assert omitted == 3 and messages[-2]["content"] == actions[-1]
