"""Task-file helpers shared by built-in envs: load a JSONL task file and validate env-specific ``data``.

:meth:`TaskSet.load` checks the generic fields (``id``, ``prompt``, ...) with file and line in its
errors; :func:`load_task_file` adds the env's own check of ``data`` with the same ``path:line`` prefix,
so a malformed file always names the line and the field.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentic_rl.tasks.core import Task, TaskSet

Validator = Callable[[Task, str], None]


def load_task_file(path: str | Path, validate: Validator) -> TaskSet:
    """Load ``path`` and call ``validate(task, "path:line")`` for every task (it raises ``TaskFileError``)."""
    tasks = TaskSet.load(path)
    with Path(path).open(encoding="utf-8") as fh:
        line_numbers = [i for i, line in enumerate(fh, 1) if line.strip() and not line.strip().startswith("#")]
    for task, lineno in zip(tasks, line_numbers, strict=True):
        validate(task, f"{path}:{lineno}")
    return tasks


def resolve_tasks(tasks: TaskSet | str | Path | None, split: str | None, default: Callable[[], TaskSet],
                  validate: Validator) -> TaskSet:
    """The task set an env constructor was given (a set, a JSONL path, or ``None`` = ``default()``),
    restricted to ``split`` (``None`` keeps every split). Sets passed in are validated too."""
    if tasks is None:
        taskset = default()
    elif isinstance(tasks, (str, Path)):
        taskset = load_task_file(tasks, validate)
    elif isinstance(tasks, TaskSet):
        taskset = tasks
        for task in taskset:
            validate(task, f"{taskset.name}[{task.id}]")
    else:
        raise TypeError(f"tasks must be a TaskSet, a JSONL path or None, got {type(tasks).__name__}")
    if split is None:
        return taskset
    chosen = taskset.split(split)
    if len(chosen) == 0:
        raise ValueError(f"no task in split {split!r} of {taskset.name}; splits present: {taskset.splits()}")
    return chosen
