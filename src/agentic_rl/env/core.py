"""The environment contract: a text-in, text-out ``gymnasium.Env``.

Every agentic-rl environment is a :class:`Env`. The agent writes raw text (see
:mod:`agentic_rl.agent.actions` for the grammar); the env parses it itself, so a user's env and the
policy agree on one format.

Return values (the contract every env is tested against):

``reset(seed=None, options=None) -> (observation, info)``
    Starts a new episode. ``seed`` re-seeds the env's RNG (same seed ⇒ same episode). ``options`` may
    carry ``{"task": Task | task_id}`` to pick the task; otherwise the env draws one from its task set.
    ``observation`` is the task prompt plus anything visible at the start. ``info`` holds at least
    ``task_id`` and, where the action set is enumerable, ``admissible_actions``.

``step(action) -> (observation, reward, terminated, truncated, info)``
    ``action`` is the raw text the policy wrote (a ``str``; anything else raises ``TypeError``).

    - ``observation``: what the agent sees next (tool output, page, error message).
    - ``reward``: a finite float within ``reward_range``.
    - ``terminated``: the *task* ended — solved, or failed for good (final answer given, fatal move).
    - ``truncated``: a *budget* ran out (max steps, time) before the task ended.
    - ``info``: always ``success`` (bool: the env's independent check of the task outcome — only
      meaningful once the episode ended, ``False`` before), ``reward_terms`` (dict name → float that sums
      to ``reward``), ``action_kind`` (parsed kind or ``"invalid"``); optionally ``admissible_actions``,
      ``error`` (a short machine-readable error kind, e.g. ``parse_error``, ``unknown_tool``).

    Garbage never raises: an unparseable or inadmissible action yields an error observation and the
    ``invalid_action_penalty`` reward term; the episode goes on.

``state() -> dict``
    A JSON-serialisable snapshot of the episode (task id, step count, env-specific state).

``close()``
    Releases resources (sandbox workspaces, subprocesses). Safe to call twice.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import gymnasium
import numpy as np

from agentic_rl.agent.actions import ACTION_KINDS, Action, ParseError, parse
from agentic_rl.tasks.core import Task, TaskSet

_SAMPLE_CHARS = string.ascii_letters + string.digits + string.punctuation + " \n\téßü€中😀"


class TextSpace(gymnasium.spaces.Space[str]):
    """Any Unicode string of at most ``max_length`` characters.

    Unlike ``gymnasium.spaces.Text`` it does not restrict the character set: agents write free text.
    ``sample()`` draws short random strings (for checkers and smoke tests), not meaningful actions.
    """

    def __init__(self, max_length: int = 65536, seed: int | np.random.Generator | None = None):
        if max_length <= 0:
            raise ValueError(f"max_length must be > 0, got {max_length}")
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(0, min(self.max_length, 32) + 1))
        idx = self.np_random.integers(0, len(_SAMPLE_CHARS), size=length)
        return "".join(_SAMPLE_CHARS[i] for i in idx)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length


#: ``info["error"]`` kinds that count against ``Env.max_invalid_actions``
INVALID_ACTION_ERRORS = frozenset({"parse_error", "invalid_action", "unknown_tool", "bad_arguments"})


class Env(gymnasium.Env[str, str]):
    """Base class for text environments. Subclasses implement ``_reset``, ``_step`` and ``_state``.

    The base class owns the boring parts every env needs: the spaces, seeding, task selection, the type
    check on actions, parsing with the shared grammar, the step counter and the ``info`` skeleton.
    A subclass sees only parsed actions: ``_step(action)`` gets an :class:`Action` of one of its
    ``accepted_actions`` kinds and returns the same 5-tuple as ``step``; it uses ``self.rng`` (seeded by
    ``reset``) for any randomness so that episodes replay exactly. See :mod:`agentic_rl.env.toys` for a
    complete env in a few dozen lines, and ``check_env`` to test one.

    Constructor arguments (all keyword except ``tasks``): ``tasks`` (the TaskSet to draw from),
    ``invalid_action_penalty`` (reward for an unusable action, default -0.1), ``perturbation`` (one of
    ``perturbations``, for robustness evaluation), ``max_observation_chars`` (observations are clipped to
    this), ``render_mode`` (``None`` or ``"ansi"``: ``render()`` returns the last observation).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}
    #: One line shown by ``agentic-rl envs``.
    description: ClassVar[str] = ""
    #: Action kinds this env accepts (see :data:`agentic_rl.agent.actions.ACTION_KINDS`).
    accepted_actions: ClassVar[tuple[str, ...]] = ACTION_KINDS
    #: Names accepted by ``perturbation=`` (robustness evaluation); each keeps every task solvable.
    perturbations: ClassVar[tuple[str, ...]] = ()
    #: ``validate(task, where)`` for one task of a user's task file: raises ``TaskFileError`` naming
    #: ``where`` (``path:line``) and the ``data`` field. Training and evaluation run it on a task file
    #: before any episode (:func:`agentic_rl.env.registry.task_set`); None: generic fields only.
    task_validator: ClassVar[Callable[[Task, str], None] | None] = None
    reward_range: tuple[float, float] = (-1.0, 1.0)
    #: truncate the episode after this many unusable actions (None: only the env's own budgets apply);
    #: subclasses may take it as a constructor argument
    max_invalid_actions: int | None = None

    def __init__(
        self,
        tasks: TaskSet | None = None,
        *,
        invalid_action_penalty: float = -0.1,
        perturbation: str | None = None,
        max_observation_chars: int = 4096,
        render_mode: str | None = None,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if perturbation is not None and perturbation not in self.perturbations:
            valid = ", ".join(self.perturbations) or "(none)"
            raise ValueError(f"unknown perturbation {perturbation!r} for {type(self).__name__}; valid: {valid}")
        self.render_mode = render_mode
        self.tasks = tasks
        self.perturbation = perturbation
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.max_observation_chars = max_observation_chars
        self.observation_space = TextSpace(max_observation_chars)
        self.action_space = TextSpace(1 << 20)
        self.task: Task | None = None
        self.steps = 0
        self.invalid_actions = 0
        self._last_observation = ""
        self.rng = random.Random(0)

    # -- the public contract -----------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Start a new episode and return ``(observation, info)``.

        Args:
            seed: re-seeds ``self.rng`` (and Gymnasium's ``np_random``); the same seed and the same
                actions give the same episode. ``None`` keeps the current RNG stream going.
            options: ``{"task": Task | task_id}`` picks the task; without it one is drawn from ``tasks``.

        Returns:
            observation: the task prompt plus whatever is visible at the start (at most
                ``max_observation_chars``; longer text is clipped with a ``[truncated]`` marker).
            info: at least ``task_id`` (``None`` for an env without tasks) and ``success`` (``False``);
                ``admissible_actions`` where the action set is enumerable.
        """
        super().reset(seed=seed)
        if seed is not None:
            self.rng = random.Random(seed)
        elif not hasattr(self, "_seeded"):
            self.rng = random.Random(int(self.np_random.integers(0, 2**31 - 1)))
        self._seeded = True
        self.task = self._select_task(options or {})
        self.invalid_actions = 0
        self.steps = 0
        observation, info = self._reset(self.task)
        info = _fresh(info)
        info.setdefault("task_id", self.task.id if self.task else None)
        info.setdefault("success", False)
        self._last_observation = self._clip(observation)
        return self._last_observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Apply the policy's raw text ``action``; return ``(observation, reward, terminated, truncated, info)``.

        Returns:
            observation: what the agent sees next (tool output, page, error message), clipped like reset's.
            reward: a finite float within ``reward_range``.
            terminated: the task ended — solved, or failed for good. Stop stepping; call ``reset``.
            truncated: a budget (steps, time, invalid actions) ran out before the task ended.
            info: ``success`` (bool), ``reward_terms`` (name -> float, summing to ``reward``),
                ``action_kind``; ``error`` for an unusable action or failure; env-specific extras.

        Raises:
            TypeError: ``action`` is not a ``str`` (a caller bug). Any string, however malformed, is
                answered with an error observation and the ``invalid_action`` penalty instead.
        """
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the text the policy wrote), got {type(action).__name__}")
        if self.task is None and self.tasks is not None:
            raise RuntimeError("call reset() before step()")
        self.steps += 1
        try:
            parsed = parse(action, self.accepted_actions)
        except (ValueError, RecursionError) as exc:
            # The grammar should answer every string with a ParseError; a parser bug must not take
            # the episode down (e.g. an integer past Python's int-string digit limit).
            parsed = ParseError(f"unreadable action ({type(exc).__name__})")
        if isinstance(parsed, ParseError):
            observation, reward, terminated, truncated, info = self._invalid(parsed.message, "parse_error")
        else:
            observation, reward, terminated, truncated, info = self._step(parsed)
            info = _fresh(info)
            info.setdefault("action_kind", parsed.kind)
        info.setdefault("success", False)
        info.setdefault("reward_terms", {"reward": float(reward)})
        if info.get("error") in INVALID_ACTION_ERRORS:
            self.invalid_actions += 1
            if self.max_invalid_actions is not None and self.invalid_actions >= self.max_invalid_actions:
                truncated = True  # a budget ran out: the agent keeps writing unusable actions
        self._last_observation = self._clip(observation)
        return self._last_observation, float(reward), bool(terminated), bool(truncated), info

    def state(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot: ``env`` (class name), ``task_id``, ``steps``, plus ``_state()``."""
        snapshot = {"env": type(self).__name__, "task_id": self.task.id if self.task else None, "steps": self.steps}
        snapshot.update(self._state())
        return snapshot

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_observation
        return None

    def system_prompt(self) -> str:
        """A short description of the env's actions/tools for the policy's system prompt."""
        return ""

    def expert_action(self, skill: float = 1.0) -> str:
        """The scripted expert's next action text, using privileged state. ``skill`` in [0, 1]: 1.0 acts
        well; lower values make the documented, env-specific mistakes (habits). Uses ``self.rng``."""
        raise NotImplementedError(f"{type(self).__name__} has no scripted expert")

    # -- for subclasses ----------------------------------------------------------------------
    def _reset(self, task: Task | None) -> tuple[str, dict]:
        raise NotImplementedError

    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        raise NotImplementedError

    def _state(self) -> dict[str, Any]:
        return {}

    def _invalid(self, message: str, error: str) -> tuple[str, float, bool, bool, dict]:
        """The standard answer to an unusable action: error text, penalty, episode goes on."""
        penalty = self.invalid_action_penalty
        info = {"error": error, "action_kind": "invalid", "reward_terms": {"invalid_action": penalty}}
        return f"Error: {message}", penalty, False, False, info

    def _select_task(self, options: dict[str, Any]) -> Task | None:
        task = options.get("task")
        if isinstance(task, Task):
            return task
        if self.tasks is None:
            if task is not None:
                raise ValueError("this env has no task set; pass a Task object in options['task']")
            return None
        if isinstance(task, str):
            return self.tasks.get(task)
        if task is not None:
            raise TypeError(f"options['task'] must be a Task or a task id, got {type(task).__name__}")
        if len(self.tasks) == 0:
            raise ValueError("the env's task set is empty")
        return self.tasks[self.rng.randrange(len(self.tasks))]

    def _clip(self, observation: str) -> str:
        limit = self.max_observation_chars
        if len(observation) > limit:
            marker = "\n...[truncated]"
            return observation[: limit - len(marker)] + marker
        return observation


def _fresh(value: Any) -> Any:
    """A copy of the dicts and lists inside ``value``, so that no two returned infos share a mutable
    object (callers keep infos; Gymnasium's checker tests this)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


def admissible(info: dict[str, Any]) -> Sequence[str]:
    """The admissible action texts an env reported, or an empty list."""
    return info.get("admissible_actions") or []
