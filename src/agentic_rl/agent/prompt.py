"""Prompt rendering and the exact token ledger of a conversation.

A conversation is ``system`` (the env's tool/action description), then alternating ``user``
(observations: the task prompt first, then tool results / errors) and ``assistant`` (the policy's
actions) messages, rendered with the model's own chat template (a tokenizer without one gets the
ChatML fallback, see :func:`agentic_rl.models.policy.ensure_chat_template`). An empty system prompt
means *no* system message: the template's default applies (SmolLM2 inserts its own).

The ledger is built piece by piece, the way the rollout engine feeds the model: the prompt up to the
first assistant header, then each action's tokens, then the *glue* — the end-of-turn token, the
template text between turns, the next observation and the next assistant header. Every piece between
two actions starts with a special token (the end-of-turn token), so tokenising it alone gives exactly
the tokens it has inside the whole rendering.

**Ledger rule** (checked by :func:`check_ledger`, a mismatch raises :class:`LedgerMismatchError`
showing both token strings):

1. fast path: the ledger equals ``apply_chat_template(messages)`` token for token; else
2. the rendering is cut at the boundaries of the *sampled* actions: every piece of template/observation
   text must tokenise to exactly the ledger's tokens there, and each action's ledger tokens must decode
   to exactly the action text in the rendering. This admits one thing only: a sampled action whose ids
   are not the canonical tokenisation of its own text (``"ab"`` sampled as ``"a"``, ``"b"``), or whose
   first token would merge with the template's ``\\n`` when re-tokenised. Those ids are kept as sampled,
   because they are what the policy's logprobs refer to.

Loss mask: 1 exactly on tokens the policy sampled (action tokens + the end-of-turn token when the policy
produced it); 0 on system/user/template glue and on *forced* tokens (an end-of-turn token appended after
a stop string, an ε-greedy action).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the agent layer does not import rollout at run time (rollout imports agent)
    from agentic_rl.rollout.trajectory import Segment

_SENTINEL = "\x00\x01ACTION{}\x01\x00"


class LedgerMismatchError(AssertionError):
    """The token ledger differs from the tokenised rendering of the conversation."""


def render_messages(system: str | None, turns: Sequence[tuple[str, str]],
                    next_observation: str | None = None) -> list[dict[str, str]]:
    """Chat messages for ``turns`` = [(observation, action), ...] and an optional pending observation."""
    messages: list[dict[str, str]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for observation, action in turns:
        messages.append({"role": "user", "content": observation})
        messages.append({"role": "assistant", "content": action})
    if next_observation is not None:
        messages.append({"role": "user", "content": next_observation})
    return messages


class ChatFormat:
    """Token pieces of a tokenizer's chat template. Cheap to build; cache one per tokenizer."""

    def __init__(self, tokenizer: Any):
        from agentic_rl.models.policy import ensure_chat_template

        self.tokenizer = ensure_chat_template(tokenizer)
        probe = [{"role": "user", "content": "u"}, {"role": "assistant", "content": _SENTINEL.format(0)}]
        text = self.render(probe, add_generation_prompt=False)
        tail = text.split(_SENTINEL.format(0))[-1]
        self.eot_id = self._find_eot(tail)
        self.eot_text = tokenizer.convert_ids_to_tokens(self.eot_id)
        #: template text after an assistant message's end-of-turn token (ChatML: "\n")
        self.after_eot = tail[tail.index(self.eot_text) + len(self.eot_text):]
        self.after_eot_ids = self.encode(self.after_eot)
        self.stop_ids = {self.eot_id} | {i for i in _as_list(tokenizer.eos_token_id) if i is not None}

    def _find_eot(self, tail: str) -> int:
        tokenizer = self.tokenizer
        ids = self.encode(tail)
        specials = set(tokenizer.all_special_ids)
        if not ids or ids[0] not in specials:
            raise ValueError(f"the chat template ends assistant messages with {tail!r}, which does not start with a "
                             "special end-of-turn token; agentic-rl needs one (e.g. ChatML <|im_end|>)")
        return ids[0]

    # -- rendering -----------------------------------------------------------------------------
    def render(self, messages: Sequence[dict[str, str]], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(list(messages), tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` alone (special-token strings become their ids; no BOS added)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def messages_ids(self, messages: Sequence[dict[str, str]], add_generation_prompt: bool) -> list[int]:
        return self.encode(self.render(messages, add_generation_prompt))

    def prompt_ids(self, system: str | None, observation: str) -> list[int]:
        """The first context: system + first user message + assistant header."""
        return self.messages_ids(render_messages(system, [], observation), add_generation_prompt=True)

    def glue_ids(self, messages: Sequence[dict[str, str]], observation: str) -> list[int]:
        """Tokens after the last action's end-of-turn token, up to and including the next assistant
        header, for a conversation ``messages`` (ending with that action) followed by ``observation``."""
        before = self.render(messages, add_generation_prompt=False)
        after = self.render([*messages, {"role": "user", "content": observation}], add_generation_prompt=True)
        if not after.startswith(before):
            raise ValueError("the chat template re-renders earlier turns differently when a turn is added; "
                             "incremental token ledgers need a prefix-stable template (ChatML is)")
        return self.after_eot_ids + self.encode(after[len(before):])


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple, set)) else [value]


_FORMATS: dict[int, ChatFormat] = {}


def chat_format(tokenizer: Any) -> ChatFormat:
    """The (cached) :class:`ChatFormat` of ``tokenizer``."""
    fmt = _FORMATS.get(id(tokenizer))
    if fmt is None or fmt.tokenizer is not tokenizer:
        fmt = _FORMATS[id(tokenizer)] = ChatFormat(tokenizer)
    return fmt


def build_ledger(tokenizer: Any, system: str | None, observations: Sequence[str], actions: Sequence[str],
                 sampled_ids: Sequence[Sequence[int]] | None = None) -> Segment:
    """The exact token ledger of a conversation (see the module doc for the masks).

    ``observations[i]`` is the user message before ``actions[i]``; one extra trailing observation leaves
    the ledger open at the next assistant header. Without ``sampled_ids`` the action text is tokenised
    (SFT demos) and the end-of-turn token after it gets mask 1 (the model learns to stop); with them those
    exact ids are used, and an end-of-turn token the policy did not sample is appended with mask 0.
    """
    if len(observations) not in (len(actions), len(actions) + 1):
        raise ValueError(f"need one observation per action (+1 pending), got {len(observations)} "
                         f"observations for {len(actions)} actions")
    if sampled_ids is not None and len(sampled_ids) != len(actions):
        raise ValueError(f"sampled_ids has {len(sampled_ids)} entries for {len(actions)} actions")
    from agentic_rl.rollout.trajectory import Segment

    fmt = chat_format(tokenizer)
    ids = fmt.prompt_ids(system, observations[0])
    seg = Segment(token_ids=list(ids), loss_mask=[0] * len(ids), logprobs=[0.0] * len(ids))
    turns: list[tuple[str, str]] = []
    for i, action in enumerate(actions):
        if sampled_ids is None:
            action_ids, eot_mask = fmt.encode(action) + [fmt.eot_id], 1
        else:
            action_ids, eot_mask = list(sampled_ids[i]), 0
        start = len(seg.token_ids)
        _extend(seg, action_ids, 1)
        if not action_ids or action_ids[-1] != fmt.eot_id:
            _extend(seg, [fmt.eot_id], eot_mask)
        seg.turn_spans.append((i, start, start + len(action_ids)))
        turns.append((observations[i], action))
        if i + 1 < len(observations):
            _extend(seg, fmt.glue_ids(render_messages(system, turns), observations[i + 1]), 0)
        else:
            _extend(seg, fmt.after_eot_ids, 0)
    return seg


def _extend(seg: Segment, ids: Sequence[int], mask: int) -> None:
    seg.token_ids.extend(ids)
    seg.loss_mask.extend([mask] * len(ids))
    seg.logprobs.extend([0.0] * len(ids))


def check_ledger(tokenizer: Any, token_ids: Sequence[int], messages: Sequence[dict[str, str]],
                 action_spans: Sequence[tuple[int, int, int]], add_generation_prompt: bool) -> None:
    """Raise :class:`LedgerMismatchError` unless ``token_ids`` is the rendering of ``messages``.

    ``action_spans``: (index into ``messages``, start, end) of each *sampled* assistant message's tokens
    in ``token_ids`` (a trailing end-of-turn token inside the span is allowed). See the module doc.
    """
    fmt = chat_format(tokenizer)
    token_ids = list(token_ids)
    expected = fmt.messages_ids(messages, add_generation_prompt)
    if token_ids == expected:
        return
    marked = [dict(m) for m in messages]
    contents: list[list[int]] = []
    for n, (index, start, end) in enumerate(action_spans):
        span = token_ids[start:end]
        if span and span[-1] == fmt.eot_id:
            span = span[:-1]
        if marked[index]["role"] != "assistant" or fmt.decode(span) != messages[index]["content"]:
            _mismatch(fmt, token_ids, expected, f"action {n} tokens do not decode to assistant message {index}")
        marked[index]["content"] = _SENTINEL.format(n)
        contents.append(span)
    pieces = re.split("\x00\x01ACTION\\d+\x01\x00", fmt.render(marked, add_generation_prompt))
    rebuilt = fmt.encode(pieces[0])
    for span, piece in zip(contents, pieces[1:], strict=True):
        rebuilt += span + fmt.encode(piece)
    if rebuilt != token_ids:
        _mismatch(fmt, token_ids, expected, "template/observation tokens differ")


def _mismatch(fmt: ChatFormat, got: list[int], expected: list[int], why: str) -> None:
    first = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), min(len(got), len(expected)))
    lo = max(0, first - 8)
    show = fmt.tokenizer.convert_ids_to_tokens
    raise LedgerMismatchError(
        f"token ledger does not match the rendered conversation ({why}); first difference at token {first} "
        f"(ledger {len(got)} tokens, rendering {len(expected)}):\n"
        f"  ledger:    {show(got[lo:first + 12])}\n  rendering: {show(expected[lo:first + 12])}\n"
        f"  ledger text:    {fmt.decode(got)!r}\n  rendering text: {fmt.decode(expected)!r}"
    )
