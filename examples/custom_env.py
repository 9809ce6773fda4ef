"""A complete agentic-rl environment: guess a hidden number, told "higher" or "lower" after each guess.

It has everything a built-in env has: generated tasks with levels and splits, a reward split into terms,
an independent success check, a perturbation, and a scripted expert with a skill knob.
Run ``python examples/custom_env.py`` to check it and watch its expert; docs: docs/write_your_own_env.md.
"""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar

from agentic_rl.agent.actions import Action, answer
from agentic_rl.env.core import Env
from agentic_rl.env.registry import make, register
from agentic_rl.tasks.core import Task, TaskSet


def generate_tasks(seed: int = 0, per_split: int = 10) -> TaskSet:
    """Levels 0/1/2 hide a number in 1..10, 1..100, 1..1000; budget = guesses binary search needs."""
    rng = random.Random(seed)
    tasks = []
    for level, high in enumerate((10, 100, 1000)):
        for i in range(2 * per_split):
            split = "train" if i < per_split else "test"
            data = {"high": high, "secret": rng.randint(1, high), "max_steps": high.bit_length()}
            prompt = f"I picked a whole number from 1 to {high}. Guess it in <answer>...</answer>."
            tasks.append(Task(f"guess-L{level}-{i:02d}", prompt, data, level, split, "guess-number-v0"))
    return TaskSet(tasks, "guess-number")


class GuessNumberEnv(Env):
    description = "Guess a hidden number; each wrong guess is answered with 'higher' or 'lower'"
    accepted_actions: ClassVar[tuple[str, ...]] = ("answer",)
    perturbations: ClassVar[tuple[str, ...]] = ("paraphrase",)
    reward_range = (-1.0, 1.0)

    def __init__(self, tasks: TaskSet | None = None, *, split: str = "train", seed: int = 0,
                 perturbation: str | None = None, step_cost: float = 0.01, render_mode: str | None = None):
        tasks = (tasks or generate_tasks(seed)).split(split)
        super().__init__(tasks, perturbation=perturbation, render_mode=render_mode)
        self.step_cost = step_cost

    def _reset(self, task: Task | None) -> tuple[str, dict]:
        assert task is not None
        self.low, self.high = 1, task.data["high"]  # the range the feedback so far allows
        if self.perturbation == "paraphrase":
            return f"Find my secret integer between 1 and {self.high}; reply <answer>N</answer>.", {}
        return task.prompt, {}

    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self.task is not None
        text = action.text.strip()
        if not re.fullmatch(r"-?[0-9]{1,12}", text):
            return self._invalid(f"{text[:20]!r} is not a whole number", "invalid_action")
        guess, secret = int(text), self.task.data["secret"]
        terms = {"step_cost": -self.step_cost, "outcome": 1.0 if guess == secret else 0.0}
        info = {"success": guess == secret, "reward_terms": terms}
        if guess == secret:
            return "Correct!", sum(terms.values()), True, False, info
        if guess < secret:
            self.low, hint = max(self.low, guess + 1), "higher"
        else:
            self.high, hint = min(self.high, guess - 1), "lower"
        out_of_steps = self.steps >= self.task.data["max_steps"]
        return f"{guess} is wrong: go {hint}.", sum(terms.values()), False, out_of_steps, info

    def _state(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high}

    def system_prompt(self) -> str:
        return "Guess the hidden number. Reply with <answer>N</answer> and nothing else."

    def expert_action(self, skill: float = 1.0) -> str:
        """Binary search; with probability ``1 - skill`` a random (still consistent) guess instead."""
        if self.rng.random() >= skill:
            return answer(self.rng.randint(self.low, self.high))
        return answer((self.low + self.high) // 2)


register("guess-number-v0", GuessNumberEnv, GuessNumberEnv.description, override=True)


if __name__ == "__main__":
    from gymnasium.utils.env_checker import check_env

    from agentic_rl.envs.experts import play_expert

    check_env(GuessNumberEnv(), skip_render_check=True)
    env = make("guess-number-v0", split="test")
    for skill in (1.0, 0.5):
        for level in env.unwrapped.tasks.levels():
            tasks = env.unwrapped.tasks.level(level)
            wins = [play_expert(env, t, skill=skill, seed=i).success for i, t in enumerate(tasks)]
            print(f"skill {skill} level {level}: expert solves {sum(wins)}/{len(wins)}")
