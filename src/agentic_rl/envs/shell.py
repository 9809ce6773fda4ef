"""``shell-v0``: answer questions about (or reorganise) a generated directory tree with shell commands.

Each episode writes a generated tree (:mod:`agentic_rl.envs.shell_tasks`) into a fresh sandbox workspace.
Actions (shared grammar)::

    <action>grep -c ' ERROR ' logs/app.log</action>     run a /bin/sh command in the workspace
    <answer>17</answer>                                   final answer; ends the episode

Every command runs in a fresh sandboxed process (no network, limits from ``limits``; a command past its
wall-clock budget is killed and reported with ``info["error"] = "timeout"``); the agent sees its stdout
and stderr, cut to ``max_output_chars``. Question tasks are judged on the answer (numbers by value,
paths without ``./``, names case-insensitively); state tasks ("move every .tmp file into trash/") are
judged on the workspace's final files, whatever the answer says.

Reward: ``outcome`` 1.0 on success else 0.0, paid when the episode ends (answer, or ``max_steps`` —
state tasks are checked then too); ``step_cost`` per command (default 0); the base ``invalid_action``
penalty for unparseable actions (which never reach the sandbox).

Custom tasks (JSONL) either name a generated ``{"kind": ..., "seed": ...}`` or bring their own tree:
``{"files": {"path": "text", ...}, "answer": "42", "answer_kind": "int" | "path" | "text"}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from agentic_rl.agent.actions import Action, answer, command
from agentic_rl.env.core import Env
from agentic_rl.envs import shell_tasks
from agentic_rl.envs.task_data import load_env_tasks
from agentic_rl.rewards import combine, step_cost, total
from agentic_rl.sandbox import Limits, Sandbox
from agentic_rl.tasks.core import Task, TaskFileError, TaskSet


def _validate(task: Task, where: str) -> None:
    data = task.data
    if "files" in data:
        files = data["files"]
        if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise TaskFileError(f"{where}: 'data.files' must map relative paths to text")
        if not isinstance(data.get("answer"), str):
            raise TaskFileError(f"{where}: a custom tree needs a string 'data.answer', got {data.get('answer')!r}")
        if data.get("answer_kind", "text") not in ("int", "path", "text"):
            raise TaskFileError(f"{where}: 'data.answer_kind' must be int, path or text, "
                                f"got {data.get('answer_kind')!r}")
        return
    if data.get("kind") not in shell_tasks.KINDS:
        raise TaskFileError(f"{where}: 'data.kind' must be one of {', '.join(shell_tasks.KINDS)}, "
                            f"got {data.get('kind')!r}")
    seed = data.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):  # True is an int to Python, not a seed
        raise TaskFileError(f"{where}: 'data.seed' must be an integer, got {seed!r}")


MAX_COMMAND_CHARS = 10_000


def _unrunnable(cmd: str) -> str:
    """Why a command cannot be handed to a shell at all ("" when it can); checked before any sandbox."""
    if len(cmd) > MAX_COMMAND_CHARS:
        return f"the command is longer than {MAX_COMMAND_CHARS} characters"
    if "\x00" in cmd:
        return "the command contains a NUL byte"
    try:
        cmd.encode("utf-8")
    except UnicodeEncodeError:
        return "the command contains characters that cannot be encoded (lone surrogates)"
    return ""


class ShellEnv(Env):
    """Shell tasks on a generated tree in a sandbox (see the module docstring)."""

    description = "OS/shell tasks on a generated directory tree in a sandbox; count, find, extract, reorganise"
    accepted_actions: ClassVar[tuple[str, ...]] = ("command", "answer")
    perturbations: ClassVar[tuple[str, ...]] = shell_tasks.PERTURBATIONS
    task_validator = staticmethod(_validate)
    reward_range = (-1.0, 1.0)

    def __init__(self, tasks: TaskSet | str | Path | None = None, *, split: str | None = None,
                 levels: list[int] | None = None, sandbox: Sandbox | None = None, backend: str = "auto",
                 limits: Limits | None = None, max_steps: int = 12, step_cost: float = 0.0,
                 max_output_chars: int = 2000, **kwargs: Any):
        taskset = load_env_tasks(tasks, split=split, generate=shell_tasks.shell_tasks, validate=_validate)
        if levels is not None:
            taskset = taskset.filter(lambda t: t.difficulty in set(levels))
        if len(taskset) == 0:
            raise ValueError(f"no shell task left after split={split!r}, levels={levels!r}")
        super().__init__(taskset, **kwargs)
        self.sandbox = sandbox if sandbox is not None else Sandbox(backend=backend)
        self.limits = limits or Limits(wall_time_s=5.0, cpu_time_s=5.0, memory_mb=256, max_processes=32)
        self.max_steps = int(max_steps)
        self.step_cost = float(step_cost)
        self.max_output_chars = int(max_output_chars)
        self._session: Any = None
        self.question: shell_tasks.Question | None = None
        self.done = False
        self.commands_run = 0
        self._expert_plan: dict[str, Any] | None = None

    # -- episode -------------------------------------------------------------------------------
    def _reset(self, task: Task | None) -> tuple[str, dict]:
        assert task is not None
        self._close_session()
        self.done = False
        self.commands_run = 0
        self._expert_plan = None
        data = task.data
        if "files" in data:
            files = dict(data["files"])
            self.question = shell_tasks.Question(task.prompt, data["answer"], [], kind=data.get("answer_kind", "text"))
        else:
            world = shell_tasks.build_world(data["seed"], self.perturbation)
            files = world.files
            self.question = shell_tasks.pose(data["kind"], world)
        self._session = self.sandbox.session()
        self._session.__enter__()
        for path, text in files.items():
            self._session.write_file(path, text)
        observation = (f"{self.question.prompt}\n\nYou are in a shell in the task's directory. Run one command per "
                       f"turn as <action>COMMAND</action>; give the final answer as <answer>...</answer>.")
        return observation, {"task_id": task.id}

    def _step(self, action: Action) -> tuple[str, float, bool, bool, dict]:
        if self.done:
            return self._invalid("the episode is over; call reset()", "invalid_action")
        if action.kind == "answer":
            return self._finish(action.text, truncated=False)
        problem = _unrunnable(action.text)
        if problem:
            return self._invalid(problem, "invalid_action")
        result = self._session.run(action.text, limits=self.limits)
        self.commands_run += 1
        terms = step_cost(self.step_cost) or {"step_cost": 0.0}
        info: dict[str, Any] = {"reward_terms": terms, "exit_code": result.exit_code}
        observation = self._format(action.text, result)
        if result.timed_out:
            info["error"] = "timeout"
        return observation, total(terms), False, False, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        observation, reward, terminated, truncated, info = super().step(action)
        if terminated or truncated or self.done or self.steps < self.max_steps:
            return observation, reward, terminated, truncated, info
        end_obs, _, _, _, end_info = self._finish(None, truncated=True)
        terms = combine(info.get("reward_terms", {}), end_info["reward_terms"])
        end_info["reward_terms"] = terms
        end_info["action_kind"] = info.get("action_kind", "invalid")
        for key in ("error", "exit_code"):
            if key in info:
                end_info[key] = info[key]
        self._last_observation = self._clip(f"{observation}\n\n{end_obs}")
        return self._last_observation, total(terms), False, True, end_info

    def _format(self, cmd: str, result: Any) -> str:
        half = self.max_output_chars // 2
        parts = [f"$ {cmd}"]
        out, err = result.stdout, result.stderr
        if len(out) > self.max_output_chars:
            out = out[: self.max_output_chars] + f"\n...[{len(result.stdout) - self.max_output_chars} more chars]"
        if out:
            parts.append(out.rstrip("\n"))
        if err:
            parts.append("[stderr] " + (err[:half] + "...[truncated]" if len(err) > half else err).rstrip("\n"))
        if result.timed_out:
            parts.append(f"[killed: the command ran longer than {self.limits.wall_time_s:g} s]")
        elif result.exit_code not in (0, None):
            parts.append(f"[exit code {result.exit_code}]")
        elif result.signal is not None:
            parts.append(f"[killed by signal {result.signal}]")
        return "\n".join(parts)

    def _finish(self, given: str | None, truncated: bool) -> tuple[str, float, bool, bool, dict]:
        question = self.question
        assert question is not None
        self.done = True
        if question.check is not None:
            success = question.check(self._session.read_all())
            verdict = "The workspace is in the requested state." if success else "The workspace is not in the requested state."
        else:
            success = given is not None and shell_tasks.answers_match(given, question.answer, question.kind)
            verdict = "Correct." if success else "Wrong answer." if given is not None else "No answer given."
        terms = combine({"outcome": 1.0 if success else 0.0})
        prefix = "Step budget exhausted. " if truncated else ""
        info = {"reward_terms": terms, "success": success, "action_kind": "answer" if given is not None else "invalid"}
        return prefix + verdict, total(terms), not truncated, truncated, info

    # -- contract extras --------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {"commands_run": self.commands_run, "done": self.done,
                "kind": self.task.data.get("kind", "custom") if self.task else None}

    def system_prompt(self) -> str:
        return ("You operate a POSIX shell in a sandboxed directory. Run one command per turn as "
                "<action>COMMAND</action> and read its output. When you know the answer (or finished the "
                "requested change), reply <answer>ANSWER</answer>.")

    def expert_action(self, skill: float = 1.0) -> str:
        """Privileged expert: runs the task's reference commands, then answers with the known answer.
        Habits at lower ``skill`` (decided once per episode with probability ``1 - skill``): answering
        from a guess without looking (off by one, or a wrong name), or for state tasks claiming "done"
        after a glance without doing the work."""
        question = self.question
        assert question is not None
        if self._expert_plan is None:
            self._expert_plan = {"sloppy": self.rng.random() >= skill, "next": 0}
        plan = self._expert_plan
        commands = question.expert_commands
        if plan["sloppy"]:
            if question.check is not None:
                if plan["next"] == 0:
                    plan["next"] = len(commands)
                    return command("ls")  # looks around, then claims it is done without doing the work
                return answer("done")
            return answer(self._wrong_guess(question))
        if plan["next"] < len(commands):
            plan["next"] += 1
            return command(commands[plan["next"] - 1])
        return answer(question.answer if question.answer is not None else "done")

    def _wrong_guess(self, question: shell_tasks.Question) -> str:
        if question.kind == "int":
            return str(int(question.answer) + self.rng.choice((-1, 1)))
        if question.kind == "path":
            return "data/sales.csv" if question.answer != "data/sales.csv" else "data/raw/README"
        return "unknown"

    # -- resources ---------------------------------------------------------------------------------
    def _close_session(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.__exit__(None, None, None)

    def close(self) -> None:
        self._close_session()
        super().close()
