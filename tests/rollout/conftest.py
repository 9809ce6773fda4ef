"""Fixtures for rollout tests: a tiny random policy and a small deterministic env."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch

from agentic_rl.agent.actions import Action, answer, tool_call
from agentic_rl.env.core import Env
from agentic_rl.tasks.core import Task


class EchoEnv(Env):
    """Answer with ``data["answer"]``; the ``echo`` tool repeats its text. ``data["crash_at"] = k`` makes
    step ``k`` raise (a broken env). Offers two admissible actions."""

    accepted_actions: ClassVar[tuple[str, ...]] = ("answer", "tool_call")

    def system_prompt(self) -> str:
        return 'Tools: echo(text). Act with <tool>{"name": "echo", "arguments": {"text": "..."}}</tool> or <answer>...</answer>.'

    def _admissible(self) -> list[str]:
        return [answer(self.task.data["answer"]), tool_call("echo", {"text": "hi"})]

    def _reset(self, task: Task | None) -> tuple[str, dict]:
        return task.prompt, {"admissible_actions": self._admissible()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.task.data.get("crash_at") == self.steps + 1:
            raise RuntimeError("boom: simulated env crash")
        return super().step(action)

    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        info: dict[str, Any] = {"admissible_actions": self._admissible()}
        if action.kind == "answer":
            success = action.text == self.task.data["answer"]
            info.update(success=success, reward_terms={"outcome": float(success)})
            return ("Correct." if success else "Wrong."), float(success), True, False, info
        info["reward_terms"] = {"step_cost": -0.05}
        return f"echo: {action.arguments.get('text', '')}", -0.05, False, False, info


def echo_tasks(n: int, crash: dict[int, int] | None = None) -> list[Task]:
    crash = crash or {}
    tasks = []
    for i in range(n):
        data: dict[str, Any] = {"answer": str(i * 7)}
        if i in crash:
            data["crash_at"] = crash[i]
        tasks.append(Task(f"echo-{i}", f"Question {i}: what is {i} times 7?", data))
    return tasks


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models gain nothing from threads, and on a shared 2-core machine busy-waiting threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_policy(tiny_model_path):
    from agentic_rl.models import load_policy

    return load_policy(str(tiny_model_path))


@pytest.fixture
def echo_env():
    return EchoEnv


@pytest.fixture
def make_tasks():
    return echo_tasks


@pytest.fixture
def engine(tiny_policy):
    from agentic_rl.rollout import RolloutEngine

    return RolloutEngine(tiny_policy, max_context=1024, max_batch=8)
