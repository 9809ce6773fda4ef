"""Wrappers, each named for what it does to an :class:`~agentic_rl.env.core.Env`.

All derive from :class:`TextWrapper`, which forwards the agentic-rl additions to the contract
(``state()``, ``system_prompt()``, ``expert_action()``) and lets any other public attribute fall through
to the wrapped env (``wrapped.task``, ``wrapped.steps``...), so code written for a bare env keeps working
on a wrapped one.

- :class:`TimeLimit` — at most ``max_steps`` steps per episode, then ``truncated``.
- :class:`IllegalActionPenalty` — set the penalty for unusable actions; end the episode after too many.
- :class:`StepTimeout` — a step that hangs or raises becomes a failed step with a penalty.
- :class:`RewardShaping` — add named reward terms, each kept in ``info["reward_terms"]``.
- :class:`RecordEpisode` — append every reset and step to a JSONL file.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium

from agentic_rl.env._host import crash_text

StepResult = tuple[str, float, bool, bool, dict]

#: ``info["error"]`` kinds that mean "the agent's action was unusable" (not an env failure).
ILLEGAL_ACTION_ERRORS = frozenset({"parse_error", "invalid_action", "unknown_tool", "bad_arguments"})


class TextWrapper(gymnasium.Wrapper):
    """Base of agentic-rl wrappers: forwards the text-env extras and unknown public attributes."""

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails. Private names and "env" itself must not recurse.
        if name.startswith("_") or name == "env":
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return getattr(self.env, name)

    def state(self) -> dict[str, Any]:
        """The wrapped env's JSON-serialisable snapshot."""
        return self.env.state()

    def system_prompt(self) -> str:
        return self.env.system_prompt()

    def expert_action(self, skill: float = 1.0) -> str:
        return self.env.expert_action(skill)

    @property
    def reward_range(self) -> tuple[float, float]:
        return self.env.reward_range


def _add_term(info: dict, name: str, value: float) -> None:
    terms = info.setdefault("reward_terms", {})
    terms[name] = terms.get(name, 0.0) + value


class TimeLimit(TextWrapper):
    """End the episode with ``truncated=True`` after ``max_steps`` steps (``info["truncated_by"]`` says
    ``"time_limit"``). An episode the env terminates on that same step stays terminated, not truncated."""

    def __init__(self, env: gymnasium.Env, max_steps: int):
        super().__init__(env)
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be an integer >= 1, got {max_steps!r}")
        self.max_steps = max_steps
        self.elapsed_steps = 0

    def reset(self, **kwargs: Any) -> tuple[str, dict]:
        self.elapsed_steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: str) -> StepResult:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.elapsed_steps += 1
        if self.elapsed_steps >= self.max_steps and not terminated and not truncated:
            truncated = True
            info["truncated_by"] = "time_limit"
        return observation, reward, terminated, truncated, info


class IllegalActionPenalty(TextWrapper):
    """Penalise unusable actions and stop an episode that produces too many.

    A step whose ``info["error"]`` is one of :data:`ILLEGAL_ACTION_ERRORS` counts as illegal. Its
    ``invalid_action`` reward term is set to ``penalty`` (replacing what the env charged; the reward
    changes by the difference), unless ``penalty`` is None (keep the env's). The ``max_invalid``-th
    illegal step of an episode ends it with ``truncated=True`` and ``info["truncated_by"] =
    "invalid_actions"``; ``info["invalid_actions"]`` counts them so far.
    """

    def __init__(self, env: gymnasium.Env, penalty: float | None = -0.1, max_invalid: int | None = 5):
        super().__init__(env)
        if penalty is not None and not math.isfinite(penalty):
            raise ValueError(f"penalty must be finite, got {penalty!r}")
        if max_invalid is not None and max_invalid < 1:
            raise ValueError(f"max_invalid must be >= 1 or None, got {max_invalid!r}")
        self.penalty = penalty
        self.max_invalid = max_invalid
        self.invalid_count = 0

    def reset(self, **kwargs: Any) -> tuple[str, dict]:
        self.invalid_count = 0
        return self.env.reset(**kwargs)

    def step(self, action: str) -> StepResult:
        observation, reward, terminated, truncated, info = self.env.step(action)
        if info.get("error") in ILLEGAL_ACTION_ERRORS:
            self.invalid_count += 1
            if self.penalty is not None:
                terms = info.setdefault("reward_terms", {})
                charged = terms.get("invalid_action", 0.0)
                terms["invalid_action"] = self.penalty
                reward = reward - charged + self.penalty
            if self.max_invalid is not None and self.invalid_count >= self.max_invalid and not terminated:
                truncated = True
                info["truncated_by"] = "invalid_actions"
        info["invalid_actions"] = self.invalid_count
        return observation, reward, terminated, truncated, info


class StepTimeout(TextWrapper):
    """Turn a step that hangs or raises into a recorded failure, never an exception.

    Each step runs in a worker thread. If it takes longer than ``seconds``: observation
    ``"Error: the step timed out..."``, reward ``penalty`` (term ``timeout``), ``truncated=True`` (a time
    budget ran out), ``info["error"] = "timeout"``. If it raises: reward ``penalty`` (term ``env_error``),
    ``terminated=True``, ``info["error"] = "env_error"`` and ``info["exception"]`` naming it. A
    ``TypeError`` for a non-str action is still raised (a caller bug, not an env failure).

    A timed-out step keeps running in its (daemon) thread; the env is in an unknown state, so ``reset()``
    raises RuntimeError while that step is still running — rebuild the env instead (EnvPool does).
    """

    def __init__(self, env: gymnasium.Env, seconds: float = 60.0, penalty: float = -1.0):
        super().__init__(env)
        if not seconds > 0:
            raise ValueError(f"seconds must be > 0, got {seconds!r}")
        self.seconds = float(seconds)
        self.penalty = float(penalty)
        self._runaway: threading.Thread | None = None

    def reset(self, **kwargs: Any) -> tuple[str, dict]:
        if self._runaway is not None and self._runaway.is_alive():
            raise RuntimeError(f"a step that timed out after {self.seconds} s is still running in this env; "
                               "its state is unknown, build a new env")
        self._runaway = None
        return self.env.reset(**kwargs)

    def step(self, action: str) -> StepResult:
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the text the policy wrote), got {type(action).__name__}")
        if self._runaway is not None:
            return self._failure("timeout", "the env is still busy with a step that timed out; reset it", {})
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["result"] = self.env.step(action)
            except BaseException as exc:  # noqa: BLE001 - reported as the step's failure below
                box["error"] = exc

        worker = threading.Thread(target=run, name="step-timeout", daemon=True)
        worker.start()
        worker.join(self.seconds)
        if worker.is_alive():
            self._runaway = worker
            return self._failure("timeout", f"the step timed out after {self.seconds:g} s", {})
        if "error" in box:
            return self._failure("env_error", "the environment failed", {"exception": crash_text(box["error"]).removeprefix("crash:")})
        return box["result"]

    def _failure(self, kind: str, message: str, extra: dict) -> StepResult:
        info = {"error": kind, "success": False, "reward_terms": {kind: self.penalty}, **extra}
        return f"Error: {message}", self.penalty, kind == "env_error", kind == "timeout", info


ShapingTerm = Callable[[str, float, bool, bool, dict], float]


class RewardShaping(TextWrapper):
    """Add shaping terms to the env's reward; each appears as ``info["reward_terms"]["shaping/<name>"]``.

    ``terms`` maps a name to ``fn(observation, reward, terminated, truncated, info) -> float``, called
    after each step with the env's own (unshaped) reward. The step reward becomes the env's reward plus
    every term, so ``reward_terms`` still sums to it. A term returning a non-finite value raises
    ValueError naming the term (a shaping bug should not silently poison training).
    """

    def __init__(self, env: gymnasium.Env, terms: dict[str, ShapingTerm]):
        super().__init__(env)
        for name, fn in terms.items():
            if not callable(fn):
                raise TypeError(f"shaping term {name!r} must be callable, got {type(fn).__name__}")
        self.terms = dict(terms)

    def step(self, action: str) -> StepResult:
        observation, reward, terminated, truncated, info = self.env.step(action)
        base = reward
        for name, fn in self.terms.items():
            value = float(fn(observation, base, terminated, truncated, info))
            if not math.isfinite(value):
                raise ValueError(f"shaping term {name!r} returned {value!r}; terms must be finite")
            _add_term(info, f"shaping/{name}", value)
            reward += value
        return observation, reward, terminated, truncated, info


class RecordEpisode(TextWrapper):
    """Append every reset and step to the JSONL file ``path`` (created with its folder if needed).

    One object per line: ``{"episode", "step", "kind": "reset"|"step", "time", "action", "observation",
    "reward", "terminated", "truncated", "info"}`` (``action``/``reward``/... only on steps). Episodes are
    numbered from 0 per wrapper. Values that are not JSON become their ``repr``; lone surrogates are
    escaped. Each line is flushed at once, so the file survives a crash.
    """

    def __init__(self, env: gymnasium.Env, path: str | Path):
        super().__init__(env)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self.episode = -1
        self.step_index = 0

    def reset(self, **kwargs: Any) -> tuple[str, dict]:
        observation, info = self.env.reset(**kwargs)
        self.episode += 1
        self.step_index = 0
        self._write({"kind": "reset", "seed": kwargs.get("seed"), "observation": observation, "info": info})
        return observation, info

    def step(self, action: str) -> StepResult:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.step_index += 1
        self._write({"kind": "step", "action": action, "observation": observation, "reward": reward,
                     "terminated": terminated, "truncated": truncated, "info": info})
        return observation, reward, terminated, truncated, info

    def _write(self, row: dict[str, Any]) -> None:
        if self._file.closed:
            return
        line = json.dumps({"episode": self.episode, "step": self.step_index, "time": time.time(), **row},
                          default=repr, ensure_ascii=True)  # ASCII escapes keep lone surrogates writable
        self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        super().close()
