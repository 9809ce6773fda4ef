"""Loading an env's task source (generated, a ``TaskSet`` or a JSONL path) with env-specific validation.

``TaskSet.load`` checks the generic fields of each line; an env also needs its own ``data`` fields.
:func:`load_env_tasks` runs the env's validator on every task and, for a file, names the offending line,
so a user who wrote ``data.answer`` wrong sees ``tasks.jsonl:7: field 'data.answer' ...``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from agentic_rl.tasks.core import Task, TaskFileError, TaskSet

#: ``validate(task, where)`` raises :class:`TaskFileError` whose message starts with ``where``.
Validator = Callable[[Task, str], None]


def _line_numbers(path: Path) -> dict[str, int]:
    """Task id -> line number, read the same way ``TaskSet.load`` reads the file."""
    lines: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                raw = json.loads(stripped)
                lines[str(raw.get("id"))] = lineno
    return lines


def load_env_tasks(
    tasks: TaskSet | str | Path | None,
    *,
    split: str | None,
    generate: Callable[[], TaskSet],
    validate: Validator,
) -> TaskSet:
    """The env's task set: ``tasks`` (or ``generate()`` when None), validated, restricted to ``split``.

    ``split=None`` keeps every split. An empty result raises ``ValueError`` naming the splits present.
    """
    if tasks is None:
        taskset = generate()
    elif isinstance(tasks, (str, Path)):
        path = Path(tasks)
        taskset = TaskSet.load(path)
        lines = _line_numbers(path)
        for task in taskset:
            validate(task, f"{path}:{lines.get(task.id, '?')}")
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
        raise ValueError(f"no tasks in split {split!r} of {taskset.name}; splits present: {taskset.splits()}")
    return chosen


def require(data: dict, key: str, types: type | tuple[type, ...], where: str, what: str = "") -> object:
    """``data[key]`` checked against ``types``; a :class:`TaskFileError` names ``data.<key>`` otherwise."""
    if key not in data:
        raise TaskFileError(f"{where}: missing field 'data.{key}'")
    value = data[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _as_tuple(types):
        expected = what or " or ".join(t.__name__ for t in _as_tuple(types))
        raise TaskFileError(f"{where}: field 'data.{key}' must be {expected}, got {value!r:.60}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)
