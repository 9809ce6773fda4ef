"""Small envs for examples, tests and benchmarks of code built on the env layer.

- :class:`ReverseEnv` — a complete env in a few dozen lines: answer with the prompt's word reversed,
  optionally asking a ``hint`` tool first. The template to copy when writing a new env.
- :class:`BusyEnv` — every step burns a fixed amount of pure-Python CPU (pool throughput benchmarks).
- :class:`FaultyEnv` — a ReverseEnv that raises, hangs or kills its process on demand (failure tests).

They live in the package (not in ``tests/``) so that worker processes and Ray actors can import them.
"""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar

from agentic_rl.agent.actions import Action, answer, tool_call
from agentic_rl.env.core import Env
from agentic_rl.tasks.core import Task, TaskSet

WORDS = ("agent", "reward", "policy", "sandbox", "rollout", "gradient", "episode", "token", "value", "shell")


def reverse_tasks() -> TaskSet:
    """Ten tasks, one per word; difficulty = word length // 3."""
    return TaskSet([Task(f"reverse-{w}", f"Reverse the word {w!r}. Answer with <answer>...</answer>.",
                         {"word": w}, difficulty=len(w) // 3, env="reverse-v0") for w in WORDS], "reverse")


class ReverseEnv(Env):
    """Answer with the word reversed. The ``hint`` tool reveals the first letter (costs 0.05).

    Reward: +1 for the right answer, 0 for a wrong one (both end the episode), -0.05 per hint, the
    env's ``invalid_action_penalty`` for an action it cannot use.
    """

    description: ClassVar[str] = "Toy: answer with a word reversed; a hint tool reveals the first letter"
    accepted_actions: ClassVar[tuple[str, ...]] = ("answer", "tool_call")
    perturbations: ClassVar[tuple[str, ...]] = ("upper",)

    def __init__(self, tasks: TaskSet | None = None, *, hint_cost: float = 0.05, **kwargs: Any):
        super().__init__(tasks if tasks is not None else reverse_tasks(), **kwargs)
        self.hint_cost = hint_cost
        self.hints = 0

    def _word(self) -> str:
        word = self.task.data["word"]
        return word.upper() if self.perturbation == "upper" else word

    def _reset(self, task: Task | None) -> tuple[str, dict]:
        self.hints = 0
        return task.prompt.replace(repr(task.data["word"]), repr(self._word())), {}

    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        if action.kind == "tool_call":
            if action.name != "hint":
                return self._invalid(f"unknown tool {action.name!r}; the only tool is 'hint'", "unknown_tool")
            self.hints += 1
            observation = f"The answer starts with {self._word()[::-1][0]!r}."
            return observation, -self.hint_cost, False, False, {"reward_terms": {"step_cost": -self.hint_cost}}
        success = action.text == self._word()[::-1]
        reward = 1.0 if success else 0.0
        observation = "Correct." if success else f"Wrong: {action.text[:80]!r} is not the answer."
        return observation, reward, True, False, {"success": success, "reward_terms": {"outcome": reward}}

    def _state(self) -> dict[str, Any]:
        return {"hints": self.hints}

    def system_prompt(self) -> str:
        return 'Tools: hint (no arguments): <tool>{"name": "hint", "arguments": {}}</tool>'

    def expert_action(self, skill: float = 1.0) -> str:
        if self.hints == 0 and self.rng.random() > skill:
            return tool_call("hint")  # the unskilled habit: ask for a hint it does not need
        return answer(self._word()[::-1])


class BusyEnv(Env):
    """Each step spends ``work`` iterations of pure-Python arithmetic; episodes last ``episode_steps``."""

    description: ClassVar[str] = "Toy: a CPU-bound step of fixed cost, for throughput benchmarks"
    accepted_actions: ClassVar[tuple[str, ...]] = ("answer", "command", "tool_call", "code")

    def __init__(self, *, work: int = 20_000, episode_steps: int = 10, **kwargs: Any):
        super().__init__(None, **kwargs)
        self.work = work
        self.episode_steps = episode_steps
        self.total = 0

    def _reset(self, task: Task | None) -> tuple[str, dict]:
        self.total = 0
        return "Say anything.", {}

    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        acc = 0
        for i in range(self.work):
            acc = (acc * 31 + i) % 1_000_003
        self.total += acc
        done = self.steps >= self.episode_steps
        return f"checksum {acc}", 0.0, done, False, {"success": done, "reward_terms": {}}

    def _state(self) -> dict[str, Any]:
        return {"total": self.total}


class FaultyEnv(ReverseEnv):
    """A ReverseEnv that fails on purpose: ``fault`` is ``"raise"``, ``"hang"`` (sleep ``hang_s``),
    ``"spin"`` (a busy loop for ``hang_s``) or ``"exit"`` (``os._exit``), on ``on`` = ``"step"`` or
    ``"reset"``, after ``after`` successful calls of that kind — and, with ``only_seed``, only in
    episodes reset with that seed (so one slot of a pool fails while the others go on)."""

    def __init__(self, *, fault: str = "raise", on: str = "step", after: int = 0, hang_s: float = 3600.0,
                 only_seed: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        if fault not in ("raise", "hang", "spin", "exit") or on not in ("step", "reset"):
            raise ValueError(f"bad fault spec: fault={fault!r}, on={on!r}")
        self.fault, self.on, self.after, self.hang_s, self.only_seed = fault, on, after, hang_s, only_seed
        self.calls = 0
        self.episode_seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        self.episode_seed = seed
        self._maybe_fail("reset")
        return super().reset(seed=seed, options=options)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self._maybe_fail("step")
        return super().step(action)

    def _maybe_fail(self, kind: str) -> None:
        if kind != self.on or (self.only_seed is not None and self.episode_seed != self.only_seed):
            return
        self.calls += 1
        if self.calls <= self.after:
            return
        if self.fault == "raise":
            raise RuntimeError(f"FaultyEnv failed on {kind} #{self.calls}")
        if self.fault == "exit":
            os._exit(3)
        end = time.monotonic() + self.hang_s
        while time.monotonic() < end:
            if self.fault == "hang":
                time.sleep(min(1.0, end - time.monotonic()))
