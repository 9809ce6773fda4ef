"""Tasks and task sets.

A :class:`Task` is one problem an environment can pose: an id, the prompt the agent sees, the
environment-specific ``data`` (privileged: answers, hidden tests, goal state), a ``difficulty`` level
(0 = easiest) and the ``split`` it belongs to (``train`` / ``test`` / anything a user chooses).

A :class:`TaskSet` is an ordered collection with JSONL load/save. File format, one JSON object per line::

    {"id": "calc-0001", "prompt": "What is 1234*5678?", "data": {...}, "difficulty": 1, "split": "train",
     "env": "tool-use-v0", "tags": ["calc"]}

``id`` and ``prompt`` are required; ``data`` defaults to ``{}``, ``difficulty`` to 0, ``split`` to ``"train"``.
Blank lines and lines starting with ``#`` are skipped; the file is UTF-8 (a leading BOM and CRLF line ends
are fine). A malformed line — bad JSON or UTF-8, a repeated key or id, a missing or ill-typed field —
raises :class:`TaskFileError` naming the file, line and field; so does a file without any task.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


class TaskFileError(ValueError):
    """A task file (or task dict) is malformed. The message names the file, line and field."""


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str
    data: dict[str, Any] = field(default_factory=dict)
    difficulty: int = 0
    split: str = "train"
    env: str | None = None
    tags: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tags"] = list(self.tags)
        return d

    @classmethod
    def from_dict(cls, raw: Any, where: str = "task") -> Task:
        """Build a task from a JSON object, validating every field (errors name ``where`` + field)."""
        if not isinstance(raw, dict):
            raise TaskFileError(f"{where}: expected a JSON object, got {_json_type(raw)}")
        unknown = set(raw) - {"id", "prompt", "data", "difficulty", "split", "env", "tags"}
        if unknown:
            raise TaskFileError(f"{where}: unknown field(s) {sorted(unknown)}")
        for name in ("id", "prompt"):
            if name not in raw:
                raise TaskFileError(f"{where}: missing required field '{name}'")
            if not isinstance(raw[name], str) or not raw[name]:
                raise TaskFileError(f"{where}: field '{name}' must be a non-empty string, got {raw[name]!r}")
        data = raw.get("data", {})
        if not isinstance(data, dict):
            raise TaskFileError(f"{where}: field 'data' must be an object, got {_json_type(data)}")
        difficulty = raw.get("difficulty", 0)
        if not isinstance(difficulty, int) or isinstance(difficulty, bool) or difficulty < 0:
            raise TaskFileError(f"{where}: field 'difficulty' must be an integer >= 0, got {difficulty!r}")
        split = raw.get("split", "train")
        if not isinstance(split, str) or not split:
            raise TaskFileError(f"{where}: field 'split' must be a non-empty string, got {split!r}")
        env = raw.get("env")
        if env is not None and not isinstance(env, str):
            raise TaskFileError(f"{where}: field 'env' must be a string, got {env!r}")
        tags = raw.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise TaskFileError(f"{where}: field 'tags' must be a list of strings, got {tags!r}")
        return cls(raw["id"], raw["prompt"], data, difficulty, split, env, tuple(tags))


#: how a Python type of parsed JSON is called in a task file (what the user wrote: ``null``, not ``NoneType``)
JSON_TYPE_NAMES: dict[type, str] = {dict: "an object", list: "a list", str: "a string", int: "an integer",
                                    float: "a number", bool: "true or false", type(None): "null"}


def _json_type(value: Any) -> str:
    return JSON_TYPE_NAMES.get(type(value), type(value).__name__)


class TaskSet:
    """An ordered, immutable collection of tasks with unique ids."""

    def __init__(self, tasks: Iterable[Task], name: str = "tasks"):
        self.name = name
        self._tasks = list(tasks)
        seen: set[str] = set()
        for t in self._tasks:
            if t.id in seen:
                raise TaskFileError(f"{name}: duplicate task id {t.id!r}")
            seen.add(t.id)
        self._by_id = {t.id: t for t in self._tasks}

    # -- collection protocol -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    def __getitem__(self, index: int) -> Task:
        return self._tasks[index]

    def __repr__(self) -> str:
        return f"TaskSet({self.name!r}, n={len(self)}, levels={self.levels()}, splits={self.splits()})"

    def get(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise KeyError(f"no task with id {task_id!r} in {self.name}") from None

    # -- views ---------------------------------------------------------------------------------
    def filter(self, predicate: Callable[[Task], bool]) -> TaskSet:
        return TaskSet([t for t in self._tasks if predicate(t)], self.name)

    def split(self, name: str) -> TaskSet:
        """The tasks of one split (``train``, ``test``...)."""
        out = self.filter(lambda t: t.split == name)
        out.name = f"{self.name}[{name}]"
        return out

    def level(self, difficulty: int) -> TaskSet:
        return self.filter(lambda t: t.difficulty == difficulty)

    def levels(self) -> list[int]:
        return sorted({t.difficulty for t in self._tasks})

    def splits(self) -> list[str]:
        return sorted({t.split for t in self._tasks})

    def sample(self, n: int, rng: random.Random) -> list[Task]:
        """``n`` tasks drawn with replacement when ``n > len(self)``, else without."""
        if not self._tasks:
            raise ValueError(f"{self.name}: cannot sample from an empty task set")
        if n <= len(self._tasks):
            return rng.sample(self._tasks, n)
        return [rng.choice(self._tasks) for _ in range(n)]

    # -- I/O -----------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for t in self._tasks:
                fh.write(json.dumps(t.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> TaskSet:
        """The tasks of a JSONL file (format in the module docstring)."""
        return load_with_locations(path)[0]

    @classmethod
    def from_dicts(cls, rows: Iterable[dict[str, Any]], name: str = "tasks") -> TaskSet:
        return cls([Task.from_dict(r, f"{name}[{i}]") for i, r in enumerate(rows)], name)


def load_with_locations(path: str | Path) -> tuple[TaskSet, dict[str, str]]:
    """A task file's :class:`TaskSet` and, per task id, where it is (``"path:line"``) for later errors."""
    path = Path(path)
    tasks: list[Task] = []
    locations: dict[str, str] = {}
    for where, raw in _json_lines(path):
        task = Task.from_dict(raw, where)
        if task.id in locations:
            first = locations[task.id].rsplit(":", 1)[1]
            raise TaskFileError(f"{where}: duplicate task id {task.id!r} (first on line {first})")
        locations[task.id] = where
        tasks.append(task)
    if not tasks:
        # An empty set would only fail later ("no tasks in split ...") without naming the file.
        raise TaskFileError(f"{path}: no tasks (the file is empty or holds only blank and # comment lines)")
    return TaskSet(tasks, name=path.stem), locations


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """``(path:line, parsed JSON)`` for every non-blank, non-comment line of a UTF-8 file."""
    if not path.exists():
        raise FileNotFoundError(f"task file not found: {path}")
    if not path.is_file():
        raise TaskFileError(f"{path}: not a file (expected a JSONL task file)")
    # utf-8-sig drops the BOM some editors write; surrogateescape turns a bad byte into a lone surrogate
    # so that it names its own line below instead of failing the whole read.
    with path.open(encoding="utf-8-sig", errors="surrogateescape") as fh:
        for lineno, line in enumerate(fh, 1):
            where = f"{path}:{lineno}"
            bad = _BAD_BYTE.search(line)
            if bad:
                raise TaskFileError(f"{where}: not valid UTF-8 (byte {ord(bad.group()) - 0xDC00:#04x} at column "
                                    f"{bad.start() + 1}); save the file as UTF-8")
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            try:
                yield where, json.loads(stripped, object_pairs_hook=_unique_keys)
            except json.JSONDecodeError as exc:
                raise TaskFileError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
            except _RepeatedKey as exc:
                # json would keep the last of two equal keys and silently drop what the first one said.
                raise TaskFileError(f"{where}: key {exc.args[0]!r} appears twice in one object") from None


_BAD_BYTE = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of a byte that is not UTF-8


class _RepeatedKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out
