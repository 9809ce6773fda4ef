"""Episode memory: keep the conversation under a token budget.

**Rule.** The context always keeps the system prompt and the task prompt (the first observation).
When the next turn would not fit — context tokens + the next observation + the turn's
``max_new_tokens`` > ``budget`` — the *oldest* turns (an action together with the observation that
answered it) are dropped, as few as possible, and the task prompt gets one extra line
``[k earlier turns omitted]``. The most recent turn is always kept, even if the result still does not
fit (then the episode is later truncated at the engine's ``max_context``).

A rebuilt context is a new token sequence: the rollout starts a new ledger
:class:`~agentic_rl.rollout.trajectory.Segment` (all of it context, mask 0) and increments
``Trajectory.context_rebuilds``. Kept actions are re-tokenised from their text there; they were
already trained on in the segment where they were sampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentic_rl.agent.prompt import chat_format, render_messages

OMITTED_NOTE = "[{k} earlier turns omitted]"


def omitted_note(task_prompt: str, omitted: int) -> str:
    """The task prompt with the note saying how many turns were dropped."""
    return f"{task_prompt}\n{OMITTED_NOTE.format(k=omitted)}" if omitted else task_prompt


def history_messages(system: str | None, observations: Sequence[str], actions: Sequence[str],
                     omitted: int) -> list[dict[str, str]]:
    """Messages for the conversation with its first ``omitted`` turns dropped.

    ``observations`` has one more entry than ``actions`` (the last one is pending an answer);
    turn ``i`` is ``(actions[i], observations[i + 1])``.
    """
    if len(observations) != len(actions) + 1:
        raise ValueError(f"need len(observations) == len(actions) + 1, got {len(observations)} and {len(actions)}")
    if not 0 <= omitted <= max(len(actions) - 1, 0):
        raise ValueError(f"can omit 0..{max(len(actions) - 1, 0)} turns (the last is always kept), got {omitted}")
    messages = render_messages(system, [], omitted_note(observations[0], omitted))
    for i in range(omitted, len(actions)):
        messages.append({"role": "assistant", "content": actions[i]})
        messages.append({"role": "user", "content": observations[i + 1]})
    return messages


def fit_history(tokenizer: Any, system: str | None, observations: Sequence[str], actions: Sequence[str],
                budget: int, reserve: int = 0) -> tuple[list[dict[str, str]], int]:
    """The messages of the longest recent history whose rendering (with the next assistant header)
    plus ``reserve`` tokens fits in ``budget``; returns ``(messages, omitted_turns)``."""
    fmt = chat_format(tokenizer)
    last = max(len(actions) - 1, 0)
    for omitted in range(0, last + 1):
        messages = history_messages(system, observations, actions, omitted)
        if len(fmt.messages_ids(messages, add_generation_prompt=True)) + reserve <= budget:
            return messages, omitted
    return history_messages(system, observations, actions, last), last
