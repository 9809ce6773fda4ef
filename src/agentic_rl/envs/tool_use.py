"""``tool-use-v0``: answer short questions, deciding *when* to call *which* tool.

Tools: ``calculator(expression)`` (safe arithmetic), ``lookup(entity, field)`` over the task's knowledge
base of fictional entities, ``convert(value, from_unit, to_unit)``. Families and levels (``data["family"]``):
``direct`` (0, copy the answer from the prompt: a tool only costs a step), ``calc`` and ``convert`` (1, one
tool), ``lookup`` (2), ``lookup_calc`` (3, lookup then calculator), ``compare`` (4, a lookup per entity).

Reward per step (every term in ``info["reward_terms"]``; they sum to the reward):

- ``outcome``: +1.0 when the final ``<answer>`` is correct, else 0. An answer ends the episode.
- ``step_cost``: −0.05 per tool call that ran (repeats included).
- ``shaping/needed_tool``: +0.1 the first time each *needed* call succeeds — once per needed call, so an
  episode's shaping never exceeds 0.1 × the number of needed calls; unneeded calls earn nothing.
- ``invalid_action``: −0.1 for a parse error, unknown tool, bad arguments or a tool error (no step cost).
- A call identical to an earlier successful one: ``info["error"] = "repeated_action"``, step cost only.

An episode's return lies in [−0.1 × max_steps, 1 + 0.05 × needed calls]. ``info["success"]`` is the
answer's correctness alone. ``max_steps`` (default 6) without an answer truncates the episode.

The scripted expert (``expert_action(skill)``) at skill 1.0 makes exactly the needed calls, then answers.
Below 1.0 it decides once per episode, with probability ``1 − skill`` (or the env's ``habit_rates[family]``
where given), to follow its family's *habit*:
``direct`` calls the tool that would compute the stated value, then answers (right, one step wasted);
``calc``/``convert``/``lookup``/``lookup_calc`` guess a wrong nearby value without a tool; ``compare`` looks
up the first entity only, then names a wrong one.
``state()["expert_habit"]`` shows the decision (None until the expert first acts).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, ClassVar

from agentic_rl.agent.actions import Action, answer, tool_call
from agentic_rl.env.core import Env
from agentic_rl.envs.task_data import load_env_tasks
from agentic_rl.envs.tool_use_tasks import format_value, generate_tasks, render_prompt, validate_task
from agentic_rl.envs.tool_use_tools import (
    TOOL_ARGS,
    ToolFailure,
    answer_is_correct,
    calculate,
    canonical_unit,
    convert,
    has_operation,
    lookup,
    to_number,
)
from agentic_rl.tasks.core import Task, TaskSet

#: the names tools get under the ``renamed_tools`` perturbation
RENAMED_TOOLS = {"calculator": "compute", "lookup": "kb_get", "convert": "unit_convert"}
_NOISE_BEFORE = ["[status: ok] ", "(served from cache) ", "Query done. ", "[api v2] "]
_NOISE_AFTER = [" -- end of result", " (source: archive)", " [ok]", " Have a nice day."]


class ToolUseEnv(Env):
    description = "API/tool simulator: calculator, knowledge-base lookup, unit conversion; decide when to call which tool"
    accepted_actions: ClassVar[tuple[str, ...]] = ("tool_call", "answer")
    perturbations: ClassVar[tuple[str, ...]] = (
        "paraphrase", "distractors", "reordered_results", "noisy_observation", "renamed_tools")
    task_validator = staticmethod(validate_task)

    def __init__(
        self,
        tasks: TaskSet | str | Path | None = None,
        *,
        split: str | None = "train",
        seed: int = 0,
        max_steps: int = 6,
        max_invalid_actions: int | None = None,
        perturbation: str | None = None,
        step_cost: float = 0.05,
        needed_tool_bonus: float = 0.1,
        invalid_action_penalty: float = -0.1,
        max_observation_chars: int = 1024,
        habit_rates: dict[str, float] | None = None,
        render_mode: str | None = None,
    ):
        """``tasks``: a TaskSet, a JSONL path, or None to generate the default set from ``seed``
        (:func:`~agentic_rl.envs.tool_use_tasks.generate_tasks`). ``split`` picks the tasks the env draws
        from (None: all). A task file with unusable ``data`` raises ``TaskFileError`` naming line and field.
        """
        super().__init__(None, invalid_action_penalty=invalid_action_penalty, perturbation=perturbation,
                         max_observation_chars=max_observation_chars, render_mode=render_mode)
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.tasks = load_env_tasks(tasks, split=split, generate=lambda: generate_tasks(seed),
                                    validate=validate_task)
        self.max_steps = max_steps
        self.max_invalid_actions = max_invalid_actions
        self.step_cost = float(step_cost)
        self.needed_tool_bonus = float(needed_tool_bonus)
        self.reward_range = (min(self.invalid_action_penalty, -self.step_cost), 1.0)
        self.habit_rates = dict(habit_rates or {})
        for family, rate in self.habit_rates.items():
            if not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
                raise ValueError(f"habit_rates[{family!r}] must be a number in [0, 1], got {rate!r}")
        renamed = perturbation == "renamed_tools"
        self.tool_names = {tool: RENAMED_TOOLS[tool] if renamed else tool for tool in TOOL_ARGS}
        self._canonical = {shown: tool for tool, shown in self.tool_names.items()}
        self._new_episode()

    def _new_episode(self) -> None:
        self._ok_results: dict[str, str] = {}  # canonical call key -> observation, for successful calls
        self._calls: list[dict[str, Any]] = []
        self._needed_done: list[bool] = []
        self._needed_results: list[float | None] = []
        self._answer: str | None = None
        self._habit: bool | None = None
        self._expert_rng = random.Random(0)
        self.episode_perturbation = self.perturbation  # the env's, else the task's own (data["perturbation"])

    # -- prompts --------------------------------------------------------------------------------
    def system_prompt(self) -> str:
        tools = "; ".join(f"{self.tool_names[t]}({', '.join(args)})" for t, args in TOOL_ARGS.items())
        return (f"Tools: {tools}.\nCall a tool: <tool>{{\"name\": ..., \"arguments\": {{...}}}}</tool>\n"
                "Finish: <answer>...</answer>")

    def _reset(self, task: Task | None) -> tuple[str, dict]:
        assert task is not None
        self._new_episode()
        self._needed_done = [False] * len(task.data.get("needed", []))
        self._needed_results = [self._needed_result(call) for call in task.data.get("needed", [])]
        self._expert_rng = random.Random(self.rng.getrandbits(64))
        self.episode_perturbation = self.perturbation or task.data.get("perturbation")
        prompt = task.prompt
        if self.episode_perturbation == "paraphrase" and isinstance(task.data.get("q"), dict):
            prompt = render_prompt(task.data["family"], task.data["q"], paraphrase=True)
        return prompt, {"family": task.data["family"], "level": task.difficulty}

    @staticmethod
    def _needed_result(call: dict[str, Any]) -> float | None:
        if call["name"] != "calculator":
            return None
        return calculate(str(call["arguments"]["expression"]))

    # -- stepping -------------------------------------------------------------------------------
    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        if action.kind == "answer":
            return self._final_answer(action.text)
        tool = self._canonical.get(action.name)
        if tool is None:
            shown = ", ".join(self.tool_names.values())
            return self._invalid(f"unknown tool {action.name[:30]!r}; tools: {shown}", "unknown_tool")
        problem = self._argument_problem(tool, action.arguments)
        if problem:
            return self._invalid(problem, "bad_arguments")
        key = f"{tool}:{json.dumps(action.arguments, sort_keys=True)}"
        if key in self._ok_results:
            terms = {"step_cost": -self.step_cost}
            info = {"error": "repeated_action", "reward_terms": terms, "tool": tool}
            return self._finish_step(f"Repeated call. {self._ok_results[key]}", terms, info)
        try:
            observation = self._run_tool(tool, action.arguments)
        except ToolFailure as exc:
            self._calls.append({"tool": tool, "ok": False})
            return self._invalid(str(exc), exc.kind)
        self._ok_results[key] = observation
        self._calls.append({"tool": tool, "ok": True})
        terms = {"step_cost": -self.step_cost, "shaping/needed_tool": self._credit_needed(tool, action.arguments)}
        return self._finish_step(observation, terms, {"reward_terms": terms, "tool": tool})

    def _finish_step(self, observation: str, terms: dict[str, float], info: dict) -> tuple[str, float, bool, bool, dict]:
        truncated = self.steps >= self.max_steps
        return observation, sum(terms.values()), False, truncated, info

    def _invalid(self, message: str, error: str) -> tuple[str, float, bool, bool, dict]:
        observation, reward, terminated, _, info = super()._invalid(message, error)
        return observation, reward, terminated, self.steps >= self.max_steps, info

    def _final_answer(self, text: str) -> tuple[str, float, bool, bool, dict]:
        assert self.task is not None
        self._answer = text
        correct = answer_is_correct(text, self.task.data["answer"])
        terms = {"outcome": 1.0 if correct else 0.0}
        return ("Correct." if correct else "Incorrect."), terms["outcome"], True, False, {
            "success": correct, "reward_terms": terms}

    @staticmethod
    def _argument_problem(tool: str, arguments: dict[str, Any]) -> str:
        expected = TOOL_ARGS[tool]
        unknown = sorted(set(arguments) - set(expected))
        missing = [a for a in expected if a not in arguments]
        if unknown or missing:
            return f"{tool} takes ({', '.join(expected)})" + (f"; unknown: {', '.join(unknown)[:40]}" if unknown else "")
        for name in expected:
            value = arguments[name]
            if name == "value":
                if to_number(value) is None:
                    return f"'value' must be a number, got {str(value)[:20]!r}"
            elif name == "expression" and isinstance(value, (int, float)) and not isinstance(value, bool):
                continue
            elif not isinstance(value, str):
                return f"'{name}' must be a string"
        return ""

    def _run_tool(self, tool: str, arguments: dict[str, Any]) -> str:
        """The observation for a successful call (perturbations applied); raises ToolFailure."""
        assert self.task is not None
        reorder = self.episode_perturbation == "reordered_results"
        if tool == "calculator":
            expression = str(arguments["expression"])
            value = format_value(calculate(expression))
            text = f"{expression.strip()} = {value}" if reorder else f"Result: {value}"
        elif tool == "convert":
            number = to_number(arguments["value"])
            assert number is not None
            result = format_value(convert(number, arguments["from_unit"], arguments["to_unit"]))
            source, target = arguments["from_unit"].strip()[:12], arguments["to_unit"].strip()[:12]
            text = f"{format_value(number)} {source} = {result} {target}" if reorder else f"Result: {result} {target}"
        else:
            entity, field, value = lookup(self.task.data.get("kb", {}), arguments["entity"], arguments["field"])
            text = self._lookup_text(entity, field, value)
        if self.episode_perturbation == "noisy_observation":
            text = self.rng.choice(_NOISE_BEFORE) + text + self.rng.choice(_NOISE_AFTER)
        return text

    def _lookup_text(self, entity: str, field: str, value: Any) -> str:
        assert self.task is not None
        others = [f for f in self.task.data["kb"][entity] if f != field]
        if self.episode_perturbation == "distractors" and others:
            extra = self.rng.sample(others, min(2, len(others)))
            parts = [f"{field}: {format_value(value)}"] + [f"{f}: {format_value(self.task.data['kb'][entity][f])}"
                                                        for f in extra]
            return f"{entity} " + "; ".join(parts)
        if self.episode_perturbation == "reordered_results" and others:
            other = self.rng.choice(others)
            return f"{entity} {other}: {format_value(self.task.data['kb'][entity][other])}; {field}: {format_value(value)}"
        return f"{entity} {field}: {format_value(value)}"

    def _credit_needed(self, tool: str, arguments: dict[str, Any]) -> float:
        """Shaping for this successful call: the bonus if it fulfils a needed call not yet fulfilled."""
        assert self.task is not None
        for i, call in enumerate(self.task.data.get("needed", [])):
            if not self._needed_done[i] and call["name"] == tool and self._fulfils(i, call, arguments):
                self._needed_done[i] = True
                return self.needed_tool_bonus
        return 0.0

    def _fulfils(self, index: int, call: dict[str, Any], arguments: dict[str, Any]) -> bool:
        want = call["arguments"]
        if call["name"] == "lookup":
            return all(str(arguments[k]).strip().lower() == str(want[k]).strip().lower() for k in ("entity", "field"))
        if call["name"] == "convert":
            return (to_number(arguments["value"]) == to_number(want["value"])
                    and canonical_unit(arguments["from_unit"]) == canonical_unit(want["from_unit"])
                    and canonical_unit(arguments["to_unit"]) == canonical_unit(want["to_unit"]))
        # a calculator call counts when it computes the needed value; a bare number does not
        expression = str(arguments["expression"])
        return has_operation(expression) and abs(calculate(expression) - self._needed_results[index]) < 1e-9

    def _state(self) -> dict[str, Any]:
        return {
            "family": self.task.data.get("family") if self.task else None,
            "calls": list(self._calls),
            "needed_done": list(self._needed_done),
            "answer": self._answer,
            "expert_habit": self._habit,
            "perturbation": self.episode_perturbation,
            "tool_names": dict(self.tool_names),
        }

    # -- the scripted expert --------------------------------------------------------------------
    def expert_action(self, skill: float = 1.0) -> str:
        if self.task is None:
            raise RuntimeError("call reset() before expert_action()")
        if not 0.0 <= skill <= 1.0:
            raise ValueError(f"skill must be in [0, 1], got {skill}")
        data = self.task.data
        if self._habit is None:
            rate = 0.0 if skill >= 1.0 else self.habit_rates.get(data.get("family"), 1.0 - skill)
            self._habit = self._expert_rng.random() >= 1.0 - rate  # (draws >= skill: seeds keep their habits)
        needed = data.get("needed", [])
        truth = data["answer"]
        if not self._habit:
            pending = [call for call, done in zip(needed, self._needed_done, strict=True) if not done]
            return self._call_text(pending[0]) if pending else answer(format_value(truth))
        family = data["family"]
        if family == "direct":
            call = data.get("habit_call")
            if call and self._key(call) not in self._ok_results:
                return self._call_text(call)
            return answer(format_value(truth))
        if family == "compare" and needed and not self._needed_done[0]:
            return self._call_text(needed[0])
        return answer(format_value(self._wrong_guess(truth)))

    def _key(self, call: dict[str, Any]) -> str:
        return f"{call['name']}:{json.dumps(call['arguments'], sort_keys=True)}"

    def _call_text(self, call: dict[str, Any]) -> str:
        return tool_call(self.tool_names[call["name"]], call["arguments"])

    def _wrong_guess(self, truth: Any) -> Any:
        """A plausible answer that is guaranteed wrong (a habit must never be right by accident)."""
        rng = self._expert_rng
        if isinstance(truth, str):
            assert self.task is not None
            q = self.task.data.get("q") or {}
            options = [e for e in q.get("entities", list(self.task.data.get("kb", {}))) if e != truth]
            return rng.choice(options) if options else f"not {truth}"
        guess: float = truth
        while answer_is_correct(format_value(guess), truth):
            offset = max(1.0, abs(truth) * rng.uniform(0.02, 0.2))
            guess = truth + rng.choice([-1, 1]) * (round(offset) if isinstance(truth, int) else round(offset, 2))
        return guess


def random_action(env: ToolUseEnv, rng: random.Random) -> str:
    """A random well-formed action: any tool with arbitrary arguments, or an arbitrary answer.

    The baseline for "a random agent solves ≈0 %" (garbage text would be even weaker: all parse errors).
    """
    words = ["Result", "population", "area", "price", "km", "kg", "x", "1 + 1"]
    if rng.random() < 0.3:
        return answer(rng.choice([str(rng.randint(0, 99999)), rng.choice(words)]))
    tool = rng.choice(list(TOOL_ARGS))
    arguments = {name: rng.choice([rng.choice(words), rng.randint(0, 999)]) for name in TOOL_ARGS[tool]}
    return tool_call(env.tool_names[tool], arguments)
