"""Loading an env's task source (generated, a ``TaskSet`` or a JSONL path) with env-specific validation.

``TaskSet.load`` checks the generic fields of each line; an env also needs its own ``data`` fields.
:func:`load_env_tasks` runs the env's validator on every task and, for a file, names the offending line,
so a user who wrote ``data.answer`` wrong sees ``tasks.jsonl:7: field 'data.answer' ...``.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

from agentic_rl.tasks.core import JSON_TYPE_NAMES, Task, TaskFileError, TaskSet, load_with_locations

#: ``validate(task, where)`` raises :class:`TaskFileError` whose message starts with ``where``.
Validator = Callable[[Task, str], None]


class UnknownTaskFieldWarning(UserWarning):
    """A task's ``data`` holds a key the env does not read (often a misspelt optional field)."""


def warn_unknown_keys(data: dict, known: Iterable[str], where: str) -> None:
    """Warn, naming ``where`` and each key, about ``data`` keys the env ignores.

    A warning, not an error: a task file may carry the user's own annotations (a source, a note), but a
    misspelt optional field (``neded`` for ``needed``) would otherwise change the task without a word.
    """
    known = list(known)
    for key in sorted(set(data) - set(known)):
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean 'data.{close[0]}'?)" if close else ""
        warnings.warn(f"{where}: 'data.{key}' is not a field this env reads{hint}; it is ignored",
                      UnknownTaskFieldWarning, stacklevel=2)


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
        taskset, locations = load_with_locations(path)
        for task in taskset:
            validate(task, locations[task.id])
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
        source = tasks if isinstance(tasks, (str, Path)) else taskset.name
        raise ValueError(f"no tasks in split {split!r} of {source}; splits present: {taskset.splits()}")
    return chosen


def require(data: dict, key: str, types: type | tuple[type, ...], where: str, what: str = "") -> object:
    """``data[key]`` checked against ``types``; a :class:`TaskFileError` names ``data.<key>`` otherwise."""
    if key not in data:
        raise TaskFileError(f"{where}: missing field 'data.{key}'")
    value = data[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _as_tuple(types):
        expected = what or " or ".join(JSON_TYPE_NAMES.get(t, t.__name__) for t in _as_tuple(types))
        raise TaskFileError(f"{where}: field 'data.{key}' must be {expected}, got {value!r:.60}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)
