"""The multi-turn rollout driver: many episodes at once over an ``EnvPool`` and an :class:`Engine`.

One loop interleaves three things so that nothing waits for nothing:

1. admit new episodes (a whole GRPO group at a time) while engine rows and env slots are free;
2. collect env results that are ready (resets and steps run in the pool's workers) and turn each into
   the next turn's context — or end the episode;
3. run one engine step for every episode that is generating, and send finished actions to the pool.

Episodes waiting for their env keep no one else waiting: the others keep decoding. The loop blocks on
the pool only when no episode can decode.

Per episode the driver keeps the token ledger (:class:`~agentic_rl.rollout.ledger.LedgerBuilder`) and
checks it against the chat-template rendering at every turn boundary; memory (a token budget) may
rebuild the context, which starts a new ledger segment. A failed env request ends only its own
episode, with ``termination="error:<kind>"`` (``env_error`` or ``timeout``).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agentic_rl.agent.memory import fit_history
from agentic_rl.rollout.engine import Engine, SamplingParams, TurnOutput
from agentic_rl.rollout.ledger import LedgerBuilder
from agentic_rl.rollout.trajectory import Trajectory, Turn
from agentic_rl.tasks.core import Task


@dataclass
class _Episode:
    index: int
    task: Task
    seed: int | None
    group: str
    prefix: Sequence[str] = ()  # actions forced at the start of the episode (expert-prefix guidance)
    slot: int = -1
    seq: int | None = None
    system: str = ""
    observations: list[str] = field(default_factory=list)  # every observation, task prompt first
    actions: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # the latest env info
    ledger: LedgerBuilder | None = None
    carry: list[int] = field(default_factory=list)  # context tokens the engine has not been given yet
    restart: bool = False  # the next generate replaces the engine context (memory rebuilt it)
    opener: str = ""  # forced at the start of the turn being generated (kind exploration)
    opener_ids: list[int] = field(default_factory=list)
    rebuilds: int = 0
    pending_turn: Turn | None = None
    finish_reasons: list[str] = field(default_factory=list)
    trajectory: Trajectory | None = None


class _Run:
    """State of one :func:`rollout` call (kept out of the function so each step is a small method)."""

    def __init__(self, engine: Engine, pool: Any, env_id: str, tasks: Sequence[Task], group_size: int,
                 seeds: Sequence[int | None] | None, sampling: SamplingParams, max_turns: int, epsilon: float,
                 memory_budget: int | None, check: bool, progress: Callable | None,
                 prefixes: Sequence[Sequence[str]] | None = None, explore: float = 0.0,
                 openers: Sequence[str] = ()):
        self.engine, self.pool, self.env_id = engine, pool, env_id
        self.sampling, self.max_turns, self.epsilon = sampling, max_turns, epsilon
        self.explore, self.openers = explore, list(openers)
        self.memory_budget, self.check, self.progress = memory_budget, check, progress
        self.rng = random.Random(sampling.seed)
        self.free_slots = deque(range(pool.num_envs))
        self.queue: deque[list[_Episode]] = deque()
        for t, task in enumerate(tasks):
            seed = seeds[t] if seeds is not None else None
            group = f"{t}:{task.id}"
            prefix = tuple(prefixes[t]) if prefixes is not None else ()
            self.queue.append([_Episode(t * group_size + k, task, seed, group, prefix) for k in range(group_size)])
        self.total = len(tasks) * group_size
        self.done: list[Trajectory | None] = [None] * self.total
        self.finished = 0
        self.resetting: dict[str, list[_Episode]] = {}  # group -> members whose resets are in flight/done
        self.by_slot: dict[int, _Episode] = {}
        self.by_seq: dict[int, _Episode] = {}

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> list[Trajectory]:
        self.engine.prepare(self.sampling.seed)
        self._start_first_groups()
        while self.finished < self.total:
            self._admit()
            decoding = self.engine.has_work()
            records = self.pool.results(timeout=0 if decoding else None)
            if not decoding and not records and self.pool.pending == 0:
                raise RuntimeError("rollout stalled: no episode is decoding or waiting for its env")
            for record in records:
                self._on_record(record)
            if self.engine.has_work():
                for output in self.engine.step():
                    self._on_turn(output)
        return [t for t in self.done if t is not None]

    def _admit(self) -> None:
        while self.queue:
            group = self.queue[0]
            k = len(group)
            if self.engine.free_capacity() - self._reserved() < k or len(self.free_slots) < k:
                return
            self.queue.popleft()
            self.resetting[group[0].group] = group
            for ep in group:
                ep.slot = self.free_slots.popleft()
                self.by_slot[ep.slot] = ep
                self.pool.submit_reset(ep.slot, seed=ep.seed, options={"task": ep.task})

    def _start_first_groups(self) -> None:
        """Start the first admitted groups together, in slot order, once all their resets are back.

        Which episodes share a decode step changes the step's float rounding (and so the recorded
        logprobs); starting the first groups as their resets happen to arrive made two identical runs
        differ in the last bits. Waiting costs one reset's latency; later admissions still overlap.
        """
        self._admit()
        expected, records = self._reserved(), []
        while len(records) < expected:
            records.extend(self.pool.results(timeout=None))
        for record in sorted(records, key=lambda r: r.slot):
            self._on_record(record)

    def _reserved(self) -> int:
        """Engine rows promised to groups whose resets are still in flight."""
        return sum(len(g) for g in self.resetting.values())

    # -- env results ---------------------------------------------------------------------------
    def _on_record(self, record: Any) -> None:
        ep = self.by_slot[record.slot]
        if record.kind == "reset":
            self._on_reset(ep, record)
        else:
            self._on_step(ep, record)

    def _on_reset(self, ep: _Episode, record: Any) -> None:
        ep.info = dict(record.info or {})
        if record.error is not None:
            ep.info.setdefault("pool_error", record.error)
            ep.observations.append(record.observation)
            self._finish(ep, "error:" + str(ep.info.get("error") or "env_error"))
        else:
            ep.observations.append(record.observation)
            ep.system = self.pool.call(ep.slot, "system_prompt") or ""
        group = self.resetting[ep.group]
        if all(m.observations for m in group):
            del self.resetting[ep.group]
            self._start_group([m for m in group if m.trajectory is None])

    def _start_group(self, members: list[_Episode]) -> None:
        if not members:
            return
        for ep in members:
            ep.ledger = LedgerBuilder(self.engine.tokenizer, check=self.check)
            ep.carry = ep.ledger.start(_first_messages(ep))
        prompts = [tuple(ep.carry) for ep in members]
        if len(set(prompts)) == 1:  # the group shares its prompt: the engine prefills it once
            seqs = self.engine.open(members[0].carry, copies=len(members))
        else:
            seqs = [self.engine.open(ep.carry)[0] for ep in members]
        for ep, seq in zip(members, seqs, strict=True):
            ep.seq, ep.carry = seq, []
            self.by_seq[seq] = ep
            self._start_turn(ep)

    def _on_step(self, ep: _Episode, record: Any) -> None:
        turn = ep.pending_turn
        ep.pending_turn = None
        info = dict(record.info or {})
        turn.reward, turn.terminated, turn.truncated = float(record.reward), bool(record.terminated), bool(record.truncated)
        turn.reward_terms = {k: float(v) for k, v in dict(info.get("reward_terms") or {}).items()}
        turn.info = _public(info)
        turn.timings["env_s"] = float(record.elapsed_s)
        ep.turns.append(turn)
        ep.info = info
        if record.error is not None:
            turn.info.setdefault("pool_error", record.error)
            self._finish(ep, "error:" + str(info.get("error") or "env_error"))
        elif record.terminated:
            self._finish(ep, "success" if info.get("success") else "failed")
        elif record.truncated or len(ep.turns) >= self.max_turns:
            self._finish(ep, "truncated")
        else:
            self._continue(ep, record.observation)

    def _continue(self, ep: _Episode, observation: str) -> None:
        """Present ``observation`` as the next user message — rebuilding the context under the memory
        budget when the next turn would not fit — and start the next turn."""
        ep.observations.append(observation)
        ledger = ep.ledger
        glue = ledger.glue_for(observation)
        reserve = self.sampling.max_new_tokens
        if self.memory_budget is not None and len(ledger) + len(glue) + reserve > self.memory_budget:
            messages, _omitted = fit_history(self.engine.tokenizer, ep.system, ep.observations, ep.actions,
                                             self.memory_budget, reserve)
            ep.carry, ep.restart = ledger.start(messages), True
            ep.rebuilds += 1
        else:
            ep.carry += ledger.add_observation(observation, glue)
        if len(ledger) + 1 >= self.engine.max_context:
            self._finish(ep, "truncated")
            return
        ledger.check(add_generation_prompt=True)
        self._start_turn(ep)

    # -- policy turns --------------------------------------------------------------------------
    def _start_turn(self, ep: _Episode) -> None:
        if len(ep.turns) < len(ep.prefix):
            self._forced_turn(ep, ep.prefix[len(ep.turns)])
            return
        admissible = list(ep.info.get("admissible_actions") or [])
        if self.epsilon > 0 and admissible and self.rng.random() < self.epsilon:
            self._forced_turn(ep, str(self.rng.choice(admissible)))
            return
        if self.explore > 0 and self.openers and self.rng.random() < self.explore:
            ep.opener = self.rng.choice(self.openers)  # the policy writes the rest of this action
            ep.opener_ids = ep.ledger.format.encode(ep.opener)
            ep.carry += ep.opener_ids
        self.engine.generate(ep.seq, ep.carry, self.sampling, restart=ep.restart)
        ep.carry, ep.restart = [], False

    def _forced_turn(self, ep: _Episode, action: str) -> None:
        ids = ep.ledger.format.encode(action) + [ep.ledger.format.eot_id]
        ep.ledger.add_action(len(ep.turns), action, ids, None, sampled=False)
        ep.carry += ids
        ep.actions.append(action)
        ep.pending_turn = Turn(observation=ep.observations[-1], action=action, token_ids=ids,
                               logprobs=[0.0] * len(ids), forced=True)
        self.pool.submit_step(ep.slot, action)

    def _on_turn(self, output: TurnOutput) -> None:
        ep = self.by_seq[output.seq]
        ep.finish_reasons.append(output.finish_reason)
        ids, logprobs = list(output.token_ids), list(output.logprobs)
        eot = ep.ledger.format.eot_id
        if output.finish_reason == "context" and not ids:
            self._finish(ep, "truncated")
            return
        opener, forced, ep.opener, ep.opener_ids = ep.opener, ep.opener_ids, "", []
        ids, logprobs = forced + ids, [0.0] * len(forced) + logprobs  # nothing sampled the opener
        text = ep.ledger.format.decode(ids[:-1] if ids and ids[-1] == eot else ids)
        ep.carry = ep.ledger.add_action(len(ep.turns), text, ids, logprobs, sampled=True, explored=len(forced))
        ep.actions.append(text)
        ep.pending_turn = Turn(observation=ep.observations[-1], action=text, token_ids=ids, logprobs=logprobs,
                               explored=opener, timings={"generate_s": output.generate_s})
        self.pool.submit_step(ep.slot, text)

    # -- the end of an episode -----------------------------------------------------------------
    def _finish(self, ep: _Episode, termination: str) -> None:
        if ep.ledger is not None:
            ep.ledger.close()
        if ep.seq is not None:
            self.engine.close(ep.seq)
            del self.by_seq[ep.seq]
        del self.by_slot[ep.slot]
        self.free_slots.append(ep.slot)
        traj = Trajectory(
            task_id=ep.task.id, env_id=self.env_id, turns=ep.turns,
            segments=ep.ledger.segments if ep.ledger is not None else [],
            termination=termination, success=bool(ep.info.get("success", False)) and not termination.startswith("error:"),
            difficulty=ep.task.difficulty, group=ep.group, seed=ep.seed, context_rebuilds=ep.rebuilds,
            metadata={"system_prompt": ep.system, "finish_reasons": ep.finish_reasons,
                      "sampling": _sampling_dict(self.sampling), "epsilon": self.epsilon,
                      "explore": self.explore,
                      "guided_turns": len(ep.prefix)},
        )
        if termination.startswith("error:"):
            traj.metadata["error"] = str(ep.info.get("pool_error") or (ep.turns[-1].info.get("pool_error")
                                                                       if ep.turns else ""))
        ep.trajectory = traj
        self.done[ep.index] = traj
        self.finished += 1
        if self.progress is not None:
            self.progress(self.finished, self.total)


def _first_messages(ep: _Episode) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": ep.system}] if ep.system else []
    return [*messages, {"role": "user", "content": ep.observations[0]}]


def _sampling_dict(sampling: SamplingParams) -> dict[str, Any]:
    out = asdict(sampling)
    out["stop"] = list(sampling.stop)
    return out


def _public(info: dict[str, Any]) -> dict[str, Any]:
    """The JSON-friendly part of an env info dict."""
    return {k: v for k, v in info.items()
            if not k.startswith("_") and (isinstance(v, (str, int, float, bool, list, tuple, dict)) or v is None)}


def rollout(engine: Engine, env: Any, tasks: Sequence[Task], *, group_size: int = 1,
            seeds: Sequence[int | None] | None = None, sampling: SamplingParams | None = None, max_turns: int = 6,
            epsilon: float = 0.0, memory_budget: int | None = None, env_kwargs: dict[str, Any] | None = None,
            progress: Callable[[int, int], None] | None = None, check_ledger: bool = True,
            pool_backend: str = "thread", step_timeout_s: float | None = 60.0,
            prefixes: Sequence[Sequence[str]] | None = None, explore: float = 0.0,
            openers: Sequence[str] = ()) -> list[Trajectory]:
    """Play ``group_size`` episodes of every task; return ``len(tasks) * group_size`` trajectories in task
    order (the episodes of task ``i`` are ``[i * group_size, (i + 1) * group_size)`` and share ``group``).

    ``env``: an env id (``"tool-use-v0"``), a factory returning an ``Env``, or an ``EnvPool`` (used, not
    closed; its slots must be idle). ``seeds[i]`` is the reset seed of task ``i``'s episodes (all members
    of a group start identically). ``epsilon``: per turn, the probability of playing a uniformly random
    entry of ``info["admissible_actions"]`` (when the env gives them) instead of sampling — a *forced*
    turn (mask 0). ``prefixes[i]``: actions every episode of task ``i`` plays first, as forced turns (mask
    0; ``metadata["guided_turns"]`` counts them) — e.g. an expert's first steps, so that the policy
    practises the rest of a task it cannot yet start (see :mod:`agentic_rl.train.guide`); the policy
    samples from there on. ``explore``: per policy turn, the probability that the turn starts with a
    uniformly drawn entry of ``openers`` (e.g. ``"<tool>"``, ``"<answer>"``: see
    :data:`agentic_rl.agent.actions.OPENERS`) which the policy then continues — exploration over the *kind*
    of action where actions cannot be enumerated. The opener is part of the action: mask 1 (the trainer
    learns from it as from its own sample), logprob 0, listed in the segment's ``explored_spans`` and the
    turn's ``explored``. ``memory_budget``: token budget of the context (see :mod:`agentic_rl.agent.memory`).
    ``progress(done, total)`` is called after each episode.
    """
    from agentic_rl.env.pool import EnvPool

    sampling = sampling or SamplingParams()
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if group_size > engine.max_batch:
        raise ValueError(f"group_size={group_size} exceeds the engine's max_batch={engine.max_batch}")
    if seeds is not None and len(seeds) != len(tasks):
        raise ValueError(f"seeds has {len(seeds)} entries for {len(tasks)} tasks")
    if prefixes is not None and len(prefixes) != len(tasks):
        raise ValueError(f"prefixes has {len(prefixes)} entries for {len(tasks)} tasks")
    if not 0.0 <= explore <= 1.0:
        raise ValueError(f"explore must be in [0, 1], got {explore}")
    if explore > 0 and not openers:
        raise ValueError("explore > 0 needs openers (the texts that start each kind of action)")
    if not tasks:
        return []
    if isinstance(env, EnvPool):
        pool, own = env, False
        env_id = getattr(env, "env_id", "") or ""
    else:
        num_envs = min(len(tasks) * group_size, engine.max_batch)
        pool = EnvPool(env, num_envs, backend=pool_backend, env_kwargs=env_kwargs, step_timeout_s=step_timeout_s)
        own = True
        env_id = env if isinstance(env, str) else getattr(env, "__name__", type(env).__name__)
    if pool.num_envs < group_size:
        raise ValueError(f"the EnvPool has {pool.num_envs} slots; a group needs {group_size}")
    try:
        run = _Run(engine, pool, env_id, tasks, group_size, seeds, sampling, max_turns, epsilon, memory_budget,
                   check_ledger, progress, prefixes, explore, openers)
        return run.run()
    finally:
        if own:
            pool.close()
