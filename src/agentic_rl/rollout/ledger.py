"""Incremental token ledger of one episode, checked against the chat-template rendering.

The rollout driver appends exactly what it feeds the model: context pieces (mask 0), sampled action
tokens (mask 1, with their sampling logprobs) and forced tokens (mask 0). At every turn boundary
:meth:`LedgerBuilder.check` compares the current segment with the rendering of the messages said so
far (rule: :mod:`agentic_rl.agent.prompt`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentic_rl.agent.prompt import chat_format, check_ledger
from agentic_rl.rollout.trajectory import Segment


class LedgerBuilder:
    """Builds the :class:`Segment` s of one episode. ``segments[-1]`` is the open one."""

    def __init__(self, tokenizer: Any, check: bool = True):
        self.tokenizer = tokenizer
        self.format = chat_format(tokenizer)
        self.check_enabled = check
        self.segments: list[Segment] = []
        self.messages: list[dict[str, str]] = []
        self._spans: list[tuple[int, int, int]] = []  # (message index, start, end) of sampled actions
        self._open = False

    @property
    def current(self) -> Segment:
        return self.segments[-1]

    def __len__(self) -> int:
        """Tokens in the open segment."""
        return len(self.current.token_ids) if self.segments else 0

    def start(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Open a new segment whose context is ``messages`` rendered up to the next assistant header;
        returns its token ids (all mask 0)."""
        if self._open:
            self.close()
        ids = self.format.messages_ids(messages, add_generation_prompt=True)
        self.segments.append(Segment())
        self.messages = [dict(m) for m in messages]
        self._spans = []
        self._open = True
        self._extend(ids, 0)
        return ids

    def add_action(self, turn_index: int, text: str, ids: Sequence[int], logprobs: Sequence[float] | None,
                   sampled: bool, explored: int = 0) -> list[int]:
        """Record an action. ``sampled``: ids/logprobs come from the policy (mask 1); else forced (mask 0).
        ``explored``: the first ``explored`` ids of a sampled action were a forced opener (kind
        exploration; mask 1, listed in ``explored_spans``). Returns the end-of-turn token appended after
        it as a forced token, if any (``[]`` when the policy sampled it) — the caller must feed it to the
        model before the next observation."""
        seg = self.current
        start = len(seg.token_ids)
        if explored:
            assert sampled and 0 < explored <= len(ids), "an explored opener starts a sampled action"
            seg.explored_spans.append((start, start + explored))
        seg.token_ids.extend(ids)
        seg.loss_mask.extend([1 if sampled else 0] * len(ids))
        seg.logprobs.extend(list(logprobs) if sampled and logprobs is not None else [0.0] * len(ids))
        seg.turn_spans.append((turn_index, start, start + len(ids)))
        self.messages.append({"role": "assistant", "content": text})
        if sampled:
            self._spans.append((len(self.messages) - 1, start, start + len(ids)))
        if ids and ids[-1] == self.format.eot_id:
            return []
        self._extend([self.format.eot_id], 0)
        return [self.format.eot_id]

    def glue_for(self, observation: str) -> list[int]:
        """Tokens that would follow the last action to present ``observation`` (not appended)."""
        return self.format.glue_ids(self.messages, observation)

    def add_observation(self, observation: str, glue: Sequence[int] | None = None) -> list[int]:
        """Append the glue + ``observation`` + next assistant header; returns those ids."""
        ids = list(glue) if glue is not None else self.glue_for(observation)
        self._extend(ids, 0)
        self.messages.append({"role": "user", "content": observation})
        return ids

    def close(self) -> None:
        """End the open segment after its last action (appends the template's text after the end-of-turn
        token, so the segment equals the rendering of its messages)."""
        if not self._open:
            return
        if self.messages and self.messages[-1]["role"] == "assistant":
            self._extend(self.format.after_eot_ids, 0)
            self.check(add_generation_prompt=False)
        self._open = False

    def check(self, add_generation_prompt: bool = True) -> None:
        """Raise :class:`~agentic_rl.agent.prompt.LedgerMismatchError` if the open segment is not the
        rendering of its messages."""
        if self.check_enabled:
            check_ledger(self.tokenizer, self.current.token_ids, self.messages, self._spans, add_generation_prompt)

    def _extend(self, ids: Sequence[int], mask: int) -> None:
        seg = self.current
        seg.token_ids.extend(ids)
        seg.loss_mask.extend([mask] * len(ids))
        seg.logprobs.extend([0.0] * len(ids))
