"""Generation engines: the :class:`Engine` protocol the rollout driver talks to, and
:class:`RolloutEngine`, the batched KV-cache engine for Llama-family models on CPU or GPU.

The protocol is *sequence + turn* shaped, so an engine like vLLM (prefix caching, continuous batching)
fits without touching the driver:

- :meth:`Engine.open` starts sequences from a prompt; ``copies=k`` declares k sequences that share the
  prompt (a GRPO group): the engine may prefill it once.
- :meth:`Engine.generate` appends context tokens (glue, observation, forced tokens) to a sequence and
  queues one policy turn; ``restart=True`` replaces the context instead (memory rebuilt it).
- :meth:`Engine.step` advances every queued turn and returns the turns that finished.
- :meth:`Engine.close` frees the sequence.

A finished turn's tokens are all *sampled* (mask 1). The engine remembers which of them it has not fed
to the model yet and prepends them to the next :meth:`generate` context: callers only pass new tokens.

:class:`RolloutEngine` decodes greedy turns speculatively by default (prompt-lookup drafts verified in
the same step, see :mod:`.speculation`); what it emits is exactly what plain decoding would emit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from agentic_rl.agent.actions import STOP_STRINGS
from agentic_rl.agent.prompt import chat_format
from agentic_rl.models.kv_decoder import KVDecoder
from agentic_rl.models.sampling import counter_uniform, sample_tokens
from agentic_rl.rollout.speculation import Drafter, DrafterFactory, PromptLookup

#: a common context prefix shorter than this is not worth a separate prefill call
MIN_SHARED_PREFIX = 16


@dataclass(frozen=True)
class SamplingParams:
    """Per-turn decoding settings. Schedules (decaying temperature...) pass a new value per call.

    ``stop``: strings after which a turn is complete (the end-of-turn token always ends one).
    ``greedy`` ignores ``temperature``/``top_p``. ``seed`` seeds the engine's sampler at the start of
    a :func:`~agentic_rl.rollout.rollout` call (``None``: not reseeded).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    stop: tuple[str, ...] = STOP_STRINGS
    greedy: bool = False
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature <= 0 and not self.greedy:
            raise ValueError(f"temperature must be > 0 (or greedy=True), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass
class TurnOutput:
    """One finished policy turn. ``finish_reason``: ``eos`` (end-of-turn token sampled), ``stop`` (a stop
    string appeared), ``length`` (max_new_tokens), ``context`` (the sequence reached max_context)."""

    seq: int
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    generate_s: float = 0.0


@runtime_checkable
class Engine(Protocol):
    tokenizer: Any
    max_context: int
    max_batch: int
    stats: dict[str, int]

    def prepare(self, seed: int | None = None) -> None:
        """Called at the start of a rollout: pick up new weights, (re)seed sampling."""

    def free_capacity(self) -> int:
        """How many more sequences can be open at once."""

    def open(self, prompt_ids: Sequence[int], copies: int = 1) -> list[int]:
        """Start ``copies`` sequences whose context is ``prompt_ids``; return their ids."""

    def generate(self, seq: int, append_ids: Sequence[int], params: SamplingParams, restart: bool = False) -> None:
        """Append ``append_ids`` to ``seq``'s context (or replace it, ``restart``) and queue one turn."""

    def step(self) -> list[TurnOutput]:
        """Advance queued turns; return those that finished."""

    def has_work(self) -> bool:
        """True while some queued turn is unfinished."""

    def close(self, seq: int) -> None:
        """Free ``seq``."""


@dataclass
class _Seq:
    row: int
    pending: list[int]
    group: int | None = None
    unfed: list[int] = field(default_factory=list)
    generating: bool = False
    params: SamplingParams | None = None
    sampled: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    started: float = 0.0
    draws: int = 0  # tokens sampled over the sequence's life: with the seed and seq id, keys its randomness
    drafter: Drafter | None = None  # knows the whole context (fed, pending and unfed tokens)
    draft_len: int = 0  # tokens to draft next step; 0: only guess one token for free (see RolloutEngine._draft)
    guess: int | None = None


class RolloutEngine:
    """Batched multi-turn generation with a persistent per-sequence KV cache (see :mod:`..models.kv_decoder`).

    ``policy``: a :class:`~agentic_rl.models.Policy` (or anything with ``.model`` and ``.tokenizer``).
    ``max_batch`` sequences can be open at once; each holds at most ``max_context`` tokens. Weights are
    re-read from the model at :meth:`prepare` when they changed (LoRA deltas merged in).
    ``stats`` counts ``forward_calls``, ``prefill_tokens`` (context tokens fed, shared prompts once),
    ``decode_tokens``, ``shared_prefills``, ``draft_tokens`` (fed to be verified) and
    ``accepted_draft_tokens``.

    ``draft_tokens``: speculative decoding — each step a row also feeds up to this many tokens guessed by
    its ``drafter`` (default :class:`~agentic_rl.rollout.speculation.PromptLookup`) and keeps those the
    sampler would have drawn anyway. Emitted tokens and logprobs are those of plain decoding (exact, for
    greedy and sampled turns alike); only the number of forward passes changes. ``0`` turns it off.
    ``draft_sampled``: draft on sampled turns too, not only greedy ones. Off by default: on the rollout
    benchmark at temperature 1, 56 % of drafted tokens were kept but the longest episode copied
    nothing, so no step was saved and the wider steps made the run up to 24 % slower.
    """

    def __init__(self, policy: Any, max_context: int = 2048, max_batch: int = 32, draft_tokens: int = 4,
                 drafter: DrafterFactory = PromptLookup, draft_sampled: bool = False):
        if draft_tokens < 0:
            raise ValueError(f"draft_tokens must be >= 0, got {draft_tokens}")
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.max_context = max_context
        self.max_batch = max_batch
        self.format = chat_format(self.tokenizer)
        self.stop_ids = set(self.format.stop_ids)
        self.decoder = KVDecoder(policy.model, capacity=max_batch, max_context=max_context)
        self.draft_tokens = draft_tokens
        self.new_drafter = drafter
        self.draft_sampled = draft_sampled
        self._seed = 0
        self._seq_base = 0
        self.stats = {"forward_calls": 0, "prefill_tokens": 0, "decode_tokens": 0, "shared_prefills": 0,
                      "draft_tokens": 0, "accepted_draft_tokens": 0}
        self._seqs: dict[int, _Seq] = {}
        self._rows: list[int | None] = [None] * max_batch  # row -> seq id
        self._groups: dict[int, dict[str, Any]] = {}
        self._next_id = 0

    # -- lifecycle -----------------------------------------------------------------------------
    def prepare(self, seed: int | None = None) -> None:
        self.decoder.sync()
        if seed is not None:
            self._seed = seed
            self._seq_base = self._next_id  # sequences are numbered from here for their random keys

    def free_capacity(self) -> int:
        return self.max_batch - len(self._seqs)

    def has_work(self) -> bool:
        return any(s.generating for s in self._seqs.values())

    def open(self, prompt_ids: Sequence[int], copies: int = 1) -> list[int]:
        if copies > self.free_capacity():
            raise RuntimeError(f"cannot open {copies} sequences: only {self.free_capacity()} rows free")
        if not prompt_ids:
            raise ValueError("prompt_ids is empty")
        group = None
        if copies > 1:
            group = self._next_id
            self._groups[group] = {"prompt": list(prompt_ids), "members": [], "done": False}
        ids = []
        for _ in range(copies):
            seq_id, self._next_id = self._next_id, self._next_id + 1
            row = len(self._seqs)  # rows [0, n_open) are always the ones in use (see close)
            self._rows[row] = seq_id
            self.decoder.reset_row(row)
            self._seqs[seq_id] = _Seq(row=row, pending=list(prompt_ids), group=group, drafter=self._drafter(prompt_ids),
                                      draft_len=self.draft_tokens)
            if group is not None:
                self._groups[group]["members"].append(seq_id)
            ids.append(seq_id)
        return ids

    def context_length(self, seq: int) -> int:
        """Tokens in ``seq``'s context, including those not fed to the model yet."""
        s = self._seqs[seq]
        return self.decoder.lengths[s.row] + len(s.pending) + len(s.unfed)

    def generate(self, seq: int, append_ids: Sequence[int], params: SamplingParams, restart: bool = False) -> None:
        s = self._seqs[seq]
        if s.generating:
            raise RuntimeError(f"sequence {seq} is already generating")
        if restart:
            self._leave_group(seq)
            self.decoder.reset_row(s.row)
            s.pending, s.unfed = list(append_ids), []
            s.drafter = self._drafter(append_ids)
        else:
            s.pending = s.unfed + s.pending + list(append_ids)
            s.unfed = []
            if s.drafter is not None:
                s.drafter.extend(append_ids)
        if not s.pending:
            raise ValueError(f"sequence {seq}: nothing to condition the turn on (empty context)")
        s.generating, s.params, s.sampled, s.logprobs, s.started = True, params, [], [], time.perf_counter()

    def close(self, seq: int) -> None:
        self._leave_group(seq)
        s = self._seqs.pop(seq)
        last = len(self._seqs)  # the highest row in use before this close
        if s.row != last:  # keep rows in use contiguous: move the last row into the hole
            moved = self._rows[last]
            self.decoder.copy_row(last, s.row)
            self._seqs[moved].row = s.row
            self._rows[s.row] = moved
        self._rows[last] = None
        self.decoder.reset_row(last)

    def _leave_group(self, seq: int) -> None:
        s = self._seqs.get(seq)
        group = s.group if s else None
        if group is None:
            return
        s.group = None
        info = self._groups.get(group)
        if info is not None:
            info["members"].remove(seq)
            if not info["members"]:
                del self._groups[group]

    # -- stepping ------------------------------------------------------------------------------
    def step(self) -> list[TurnOutput]:
        finished: list[TurnOutput] = []
        self._common_prefix()
        sampled_now = self._shared_prefills(finished)
        work = [(sid, s) for sid, s in self._seqs.items() if s.generating and s.pending and sid not in sampled_now]
        if not work:
            return finished
        ready = []
        for sid, s in work:
            if self.decoder.lengths[s.row] + len(s.pending) >= self.max_context:
                finished.append(self._finish(sid, s, "context"))
            else:
                ready.append((sid, s))
        if ready:
            chunks = [s.pending for _, s in ready]
            drafts = [self._draft(s) for _, s in ready]
            hidden = self.decoder.forward([s.row for _, s in ready], [c + d for c, d in zip(chunks, drafts, strict=True)],
                                          [len(d) + 1 for d in drafts])
            self._count(chunks)
            self.stats["draft_tokens"] += sum(len(d) for d in drafts)
            for (_, s) in ready:
                s.pending = []
            finished += self._sample([sid for sid, _ in ready], hidden, drafts)
        return finished

    def _drafter(self, context: Sequence[int]) -> Drafter | None:
        if not self.draft_tokens:
            return None
        drafter = self.new_drafter()
        drafter.reset(context)
        return drafter

    def _draft(self, s: _Seq) -> list[int]:
        """Tokens to verify after ``s.pending``: ``s.draft_len`` at most, and no more than the turn or the
        context could still emit (a turn's last token is never fed, so r tokens left need r - 1).

        ``draft_len`` follows the sequence's luck: after a rejected draft it becomes the number of tokens
        kept, after a draft kept whole it grows by one. Without this, sampled turns that do not copy pay
        for wasted tokens every step (fixed 4-token drafts: the benchmark's episodes at temperature 1 ran
        ≈15 % slower). At 0 the row still guesses one token, unfed — free to check — and drafting
        resumes once a guess is right."""
        if s.drafter is None or not (s.params.greedy or self.draft_sampled):
            return []
        room = min(s.draft_len, s.params.max_new_tokens - len(s.sampled) - 1,
                   self.max_context - 1 - self.decoder.lengths[s.row] - len(s.pending))
        if s.draft_len == 0:
            guess = s.drafter.propose(1)
            s.guess = guess[0] if guess else None
            return []
        return s.drafter.propose(room)[:room] if room > 0 else []

    def _adapt(self, s: _Seq, draft: list[int], kept: int, rejected: bool, first: int) -> None:
        """Update ``s.draft_len`` after a step that kept ``kept`` draft tokens (``rejected``: the next one
        was drawn differently, rather than the draft or the turn ending) and emitted ``first`` first."""
        if draft:
            s.draft_len = kept if rejected else min(self.draft_tokens, s.draft_len + 1)
            self.stats["accepted_draft_tokens"] += kept
        elif s.guess is not None and s.guess == first:
            s.draft_len = 1
        s.guess = None

    def _count(self, chunks: Sequence[Sequence[int]]) -> None:
        self.stats["forward_calls"] += 1
        for chunk in chunks:
            key = "decode_tokens" if len(chunk) == 1 else "prefill_tokens"
            self.stats[key] += len(chunk)

    def _common_prefix(self) -> None:
        """Prefill once the leading tokens that every fresh context starts with (the system prompt and
        template of one env) and copy them to the other rows: a rollout of many different tasks pays for
        its shared header once, as a group pays for its shared prompt once."""
        lengths = self.decoder.lengths  # a context is fresh while its row holds nothing
        fresh: list[tuple[_Seq, dict[str, Any] | None]] = []
        for g in self._groups.values():
            leader = self._seqs[g["members"][0]]
            if not g["done"] and not lengths[leader.row] and any(self._seqs[m].generating for m in g["members"]):
                fresh.append((leader, g))
        fresh += [(s, None) for s in self._seqs.values()
                  if s.group is None and s.generating and s.pending and not lengths[s.row]]
        if len(fresh) < 2:
            return
        contexts = [g["prompt"] if g is not None else s.pending for s, g in fresh]
        shared = min(len(c) for c in contexts) - 1  # every context keeps a token to sample from
        first = contexts[0]
        for context in contexts[1:]:
            shared = next((i for i in range(shared) if context[i] != first[i]), shared)
        if shared < MIN_SHARED_PREFIX:
            return
        lead = fresh[0][0]
        self.decoder.reset_row(lead.row)
        self.decoder.forward([lead.row], [first[:shared]])
        self._count([first[:shared]])
        self.stats["shared_prefills"] += 1
        for s, g in fresh:
            if s is not lead:
                self.decoder.copy_row(lead.row, s.row, shared)
            if g is None:  # a group keeps its whole prompt: its leader's row already holds the header
                s.pending = s.pending[shared:]

    def _shared_prefills(self, finished: list[TurnOutput]) -> set[int]:
        """Prefill each not-yet-prefilled group prompt once, copy it to every member, and sample the first
        token of members whose whole pending context was that prompt."""
        todo = [(gid, g) for gid, g in self._groups.items()
                if not g["done"] and any(self._seqs[m].generating for m in g["members"])]
        if not todo:
            return set()
        leaders = [self._seqs[g["members"][0]] for _, g in todo]
        # a leader's row is empty, or holds the header _common_prefix shared: feed the rest of the prompt
        chunks = [g["prompt"][self.decoder.lengths[leader.row]:] for leader, (_, g) in zip(leaders, todo, strict=True)]
        hidden = self.decoder.forward([s.row for s in leaders], chunks)
        self._count(chunks)
        sampled_now: set[int] = set()
        to_sample: list[int] = []
        rows: list[int] = []
        for k, (_gid, g) in enumerate(todo):
            g["done"] = True
            self.stats["shared_prefills"] += 1
            n = len(g["prompt"])
            leader = leaders[k]
            for m in g["members"]:
                s = self._seqs[m]
                if s is not leader:
                    self.decoder.copy_row(leader.row, s.row, n)
                assert s.pending[:n] == g["prompt"], "group member diverged from the shared prompt"
                s.pending = s.pending[n:]
                if s.generating and not s.pending:
                    to_sample.append(m)
                    rows.append(k)
        if to_sample:
            finished += self._sample(to_sample, hidden[torch.tensor(rows)])
            sampled_now.update(to_sample)
        return sampled_now

    def _sample(self, seq_ids: list[int], hidden: torch.Tensor,
                drafts: list[list[int]] | None = None) -> list[TurnOutput]:
        """Draw the next token of each sequence from ``hidden`` (one row each, or ``len(draft) + 1`` rows
        when a draft was fed: the positions before each draft token and after the last)."""
        drafts = drafts if drafts is not None else [[] for _ in seq_ids]
        logits = self.decoder.logits(hidden)
        params = [self._seqs[sid].params for sid, d in zip(seq_ids, drafts, strict=True) for _ in range(len(d) + 1)]
        dev = logits.device
        # Counter-based randomness: a sequence's draws depend on (seed, seq id, draw index) only, not on
        # which other sequences happen to be decoding in the same step (that depends on env timing).
        # Position j of a draft is draw draws + j: kept, it is the draw plain decoding would have made.
        uniforms = [counter_uniform(self._seed, sid - self._seq_base, self._seqs[sid].draws + j)
                    for sid, d in zip(seq_ids, drafts, strict=True) for j in range(len(d) + 1)]
        tokens, logprobs = sample_tokens(
            logits,
            torch.tensor([p.temperature for p in params], device=dev, dtype=torch.float32),
            torch.tensor([p.top_p for p in params], device=dev, dtype=torch.float32),
            torch.tensor([p.greedy for p in params], device=dev),
            uniforms=torch.tensor(uniforms, device=dev, dtype=torch.float64),
        )
        tokens, logprobs = tokens.tolist(), logprobs.tolist()
        finished, start = [], 0
        for sid, draft in zip(seq_ids, drafts, strict=True):
            stop = start + len(draft) + 1
            output = self._emit(sid, draft, tokens[start:stop], logprobs[start:stop])
            if output is not None:
                finished.append(output)
            start = stop
        return finished

    def _emit(self, sid: int, draft: list[int], tokens: list[int], logprobs: list[float]) -> TurnOutput | None:
        """Emit ``tokens[0]``, and each next one while the previous equalled its draft token (so it was
        drawn in the right context); roll the cache back to the tokens kept. Exact speculative sampling:
        a draft token is kept with probability p(d) (the shared uniform fell in d's CDF interval), and a
        rejection draws from p without d, renormalised (the uniform fell elsewhere)."""
        s = self._seqs[sid]
        cached = self.decoder.lengths[s.row] - len(draft)  # context up to the token drawn first
        for j, (token, logprob) in enumerate(zip(tokens, logprobs, strict=True)):
            s.sampled.append(token)
            s.logprobs.append(logprob)
            s.draws += 1
            if s.drafter is not None:
                s.drafter.extend([token])
            reason = self._finish_reason(s, token, cached + j)
            if reason is not None or j == len(draft) or token != draft[j]:
                self.decoder.truncate_row(s.row, cached + j)  # keep the j draft tokens accepted so far
                self._adapt(s, draft, j, j < len(draft) and token != draft[j], tokens[0])
                if reason is not None:
                    s.unfed = [token]
                    return self._finish(sid, s, reason)
                s.pending = [token]
                return None
        raise AssertionError("unreachable: the last position always ends the loop")

    def _finish_reason(self, s: _Seq, token: int, cached: int) -> str | None:
        """Why the turn ends after ``token`` (``None``: it goes on); ``cached`` tokens precede it."""
        params = s.params
        if token in self.stop_ids:
            return "eos"
        if params.stop:
            window = max(len(x) for x in params.stop) + 2
            tail = self.format.decode(s.sampled[-window:])
            if any(x in tail for x in params.stop):
                return "stop"
        if len(s.sampled) >= params.max_new_tokens:
            return "length"
        if cached + 1 >= self.max_context:
            return "context"
        return None

    def _finish(self, sid: int, s: _Seq, reason: str) -> TurnOutput:
        s.generating = False
        return TurnOutput(sid, list(s.sampled), list(s.logprobs), reason, time.perf_counter() - s.started)
