"""Task sources of ``code-repair-v0``: user/starter JSONL files and HumanEval-derived mutants.

A task's ``data`` as users write it (only the first three fields are required)::

    {"entry_point": "average",
     "buggy_code": "def average(xs):\\n    return sum(xs) / (len(xs) + 1)\\n",
     "tests": ["average([1, 2, 3]) == 2", "assert average([5]) == 5"],   # or HumanEval "def check(candidate): ..."
     "visible_tests": 1,                   # first N tests (default 1), or a list of test ids ("t0", ...)
     "solution": "def average(xs): ...",  # optional reference: must pass every test
     "imports": ["math"]}                  # optional modules the asserts use

At load every task is **validated in the sandbox** and normalised: the tests are converted (one that
does not convert rejects the task), the buggy code is graded to record the baseline for "new error", and
a task whose buggy code already passes every test, whose tests do not run, or whose reference solution
fails is rejected with :class:`TaskFileError` naming the task id and the reason. Normalised tasks are
cached under ``cache_dir()/tasks/`` keyed by the content and the generator version, so the sandbox runs
happen once per file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agentic_rl.envs.code_grading import GradeReport, grade
from agentic_rl.models.hub import cache_dir
from agentic_rl.sandbox import Limits
from agentic_rl.tasks import code_tests, humaneval, mutations
from agentic_rl.tasks.code_tests import (
    TestConversionError,
    TestSpec,
    convert_asserts,
    convert_check,
    with_display_name,
)
from agentic_rl.tasks.core import Task, TaskFileError, TaskSet, load_with_locations

log = logging.getLogger(__name__)

STARTER_FILE = Path(__file__).parent / "data" / "code_repair_starter.jsonl"
#: Bump when validation or grading changes what a normalised task holds (the task modules' source is
#: hashed in automatically).
GENERATOR_VERSION = "code-repair-tasks/1"
VALIDATION_LIMITS = Limits(wall_time_s=5.0, cpu_time_s=5.0, memory_mb=512)


def generator_hash() -> str:
    """Hash of everything that shapes generated tasks: version string + the generating modules' source."""
    digest = hashlib.sha256(GENERATOR_VERSION.encode())
    for module in (code_tests, mutations, humaneval):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _cache_path(kind: str, key: str) -> Path:
    return cache_dir() / "tasks" / f"code_repair_{kind}_{key}.jsonl"


def _cached(path: Path, build: Callable[[], TaskSet], name: str) -> TaskSet:
    if path.exists():
        try:
            tasks = TaskSet.load(path)
            tasks.name = name
            return tasks
        except (TaskFileError, OSError) as exc:
            log.warning("ignoring unreadable task cache %s: %s", path, exc)
    tasks = build()
    tasks.name = name
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")  # concurrent builders
    tasks.save(tmp)
    tmp.replace(path)
    return tasks


# -- normalising and validating one task -------------------------------------------------------------
def _convert_user_tests(raw: Any, entry_point: str, imports: list[str], where: str) -> tuple[list[TestSpec], list[str]]:
    try:
        if isinstance(raw, str):
            conversion = convert_check(raw)
        elif isinstance(raw, list) and raw and all(isinstance(t, dict) for t in raw):
            return [TestSpec.from_dict(t, f"{where}: tests[{i}]") for i, t in enumerate(raw)], []
        elif isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw):
            conversion = convert_asserts(raw, entry_point, imports)
        else:
            raise TaskFileError(f"{where}: 'data.tests' must be a non-empty list of assert strings, of test "
                                f"objects, or a 'def check(candidate)' source")
    except TestConversionError as exc:
        raise TaskFileError(f"{where}: tests do not run: {exc}") from None
    if conversion.dropped:
        raise TaskFileError(f"{where}: tests do not run: {conversion.dropped[0]}")
    if not conversion.tests:
        raise TaskFileError(f"{where}: tests do not run: no assert calls {entry_point}()")
    return with_display_name(conversion.tests, "candidate", entry_point), conversion.imports


def _visible_ids(raw: Any, tests: list[TestSpec], where: str) -> list[str]:
    ids = [t.id for t in tests]
    if raw is None:
        raw = 1
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 0 <= raw <= len(ids):
            raise TaskFileError(f"{where}: 'data.visible_tests' must be in [0, {len(ids)}], got {raw}")
        return ids[:raw]
    if isinstance(raw, list) and all(isinstance(i, str) for i in raw):
        unknown = [i for i in raw if i not in ids]
        if unknown:
            raise TaskFileError(f"{where}: 'data.visible_tests' names unknown test ids {unknown}; ids: {ids}")
        return list(raw)
    raise TaskFileError(f"{where}: 'data.visible_tests' must be a count or a list of test ids, got {raw!r}")


def _require_str(data: dict, name: str, where: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise TaskFileError(f"{where}: field 'data.{name}' must be a non-empty string, got {value!r}")
    return value


def normalise_task(task: Task, sandbox: Any, where: str | None = None) -> Task:
    """Validate ``task`` in ``sandbox`` and return it in the normalised form the env uses."""
    where = where or f"task {task.id!r}"
    data = task.data
    entry_point = _require_str(data, "entry_point", where)
    if not entry_point.isidentifier():
        raise TaskFileError(f"{where}: 'data.entry_point' must be a Python name, got {entry_point!r}")
    buggy = _require_str(data, "buggy_code", where)
    declared = data.get("imports") or []
    if not isinstance(declared, list) or not all(isinstance(m, str) for m in declared):
        raise TaskFileError(f"{where}: 'data.imports' must be a list of module names, got {declared!r}")
    try:
        code_tests.predicate_namespace(declared)
    except TestConversionError as exc:
        raise TaskFileError(f"{where}: 'data.imports': {exc}") from None
    tests, imports = _convert_user_tests(data.get("tests"), entry_point, declared, where)
    imports = sorted(set(imports) | set(declared))
    visible = _visible_ids(data.get("visible_tests"), tests, where)
    solution = data.get("solution")
    if solution is not None:
        report = grade(sandbox, _require_str(data, "solution", where), tests, entry_point, imports=imports,
                       limits=VALIDATION_LIMITS)
        if not report.all_passed:
            failure = report.first_failure()
            raise TaskFileError(f"{where}: the reference solution fails test {failure.id}: {failure.message}")
    baseline = grade(sandbox, buggy, tests, entry_point, imports=imports, limits=VALIDATION_LIMITS)
    if baseline.all_passed:
        raise TaskFileError(f"{where}: the buggy code already passes all {len(tests)} tests")
    new_data = {**data, "tests": [t.to_dict() for t in tests], "visible_tests": visible, "imports": imports,
                "baseline": {"compiles": baseline.compiles, "passed": sorted(baseline.passed_ids)}}
    return Task(task.id, task.prompt, new_data, task.difficulty, task.split, task.env or "code-repair-v0",
                task.tags)


def is_normalised(task: Task) -> bool:
    data = task.data
    return (isinstance(data.get("baseline"), dict) and isinstance(data.get("tests"), list)
            and all(isinstance(t, dict) for t in data["tests"]))


def load_task_file(path: str | Path, sandbox: Any) -> TaskSet:
    """A user's (or the starter) JSONL file, validated and normalised (cached by file content)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"code-repair task file not found: {path}")
    raw, locations = load_with_locations(path)  # generic fields, with file:line in errors
    key = hashlib.sha256(path.read_bytes() + generator_hash().encode()).hexdigest()[:16]

    def build() -> TaskSet:
        return TaskSet([normalise_task(t, sandbox, f"{locations[t.id]} (task {t.id!r})") for t in raw],
                       name=path.stem)

    return _cached(_cache_path("file", key), build, path.stem)


def starter_tasks(sandbox: Any) -> TaskSet:
    """The hand-written starter set shipped with the package."""
    return load_task_file(STARTER_FILE, sandbox)


# -- HumanEval-derived tasks -------------------------------------------------------------------------
def _validate_candidate(problem: humaneval.HumanEvalProblem, candidate: humaneval.Candidate,
                        conversion: code_tests.Conversion, sandbox: Any) -> Task | None:
    report = grade(sandbox, candidate.buggy_code, conversion.tests, problem.entry_point,
                   imports=conversion.imports, limits=VALIDATION_LIMITS)
    if report.all_passed or "timeout" in report.statuses():
        return None  # an equivalent mutant, or one whose bug hangs every later rollout
    return humaneval.repair_task(problem, candidate, conversion, baseline_compiles=report.compiles,
                                 baseline_passed=report.passed_ids)


def _problem_tasks(problem: humaneval.HumanEvalProblem, sandbox: Any, per_level: int,
                   levels: Iterable[int]) -> list[Task]:
    conversion = humaneval.convert_problem(problem)
    if conversion is None:
        return []
    reference = grade(sandbox, problem.solution, conversion.tests, problem.entry_point,
                      imports=conversion.imports, limits=VALIDATION_LIMITS)
    if not reference.all_passed:
        failure = reference.first_failure()
        log.info("dropping %s: canonical solution fails converted test (%s)", problem.task_id,
                 failure.message if failure else "?")
        return []
    tasks: list[Task] = []
    for level in levels:
        kept = 0
        for candidate in humaneval.candidate_mutants(problem, level, limit=3 * per_level + 2):
            task = _validate_candidate(problem, candidate, conversion, sandbox)
            if task is not None:
                tasks.append(task)
                kept += 1
            if kept >= per_level:
                break
    return tasks


def humaneval_tasks(sandbox: Any, *, problems: Iterable[str] | None = None, per_level: int = 1,
                    levels: Iterable[int] = humaneval.LEVELS, workers: int | None = None) -> TaskSet:
    """HumanEval-derived repair tasks (built once in the sandbox, then read from the cache).

    ``problems`` restricts to some ids (``"HumanEval/0"``...); ``per_level`` mutants per problem and level.
    The first build of all 164 problems runs ≈1,000 short sandboxed executions (a minute or two).
    """
    levels = tuple(sorted(set(levels)))
    chosen = humaneval.load_problems()
    if problems is not None:
        wanted = set(problems)
        unknown = wanted - {p.task_id for p in chosen}
        if unknown:
            raise KeyError(f"unknown HumanEval problem ids: {sorted(unknown)}")
        chosen = [p for p in chosen if p.task_id in wanted]
    spec = json.dumps([generator_hash(), [p.task_id for p in chosen], per_level, levels])
    key = hashlib.sha256(spec.encode()).hexdigest()[:16]

    def build() -> TaskSet:
        log.info("building HumanEval repair tasks for %d problems (cached afterwards)", len(chosen))
        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            per_problem = list(pool.map(lambda p: _problem_tasks(p, sandbox, per_level, levels), chosen))
        return TaskSet([t for tasks in per_problem for t in tasks], name="humaneval-repair")

    return _cached(_cache_path("humaneval", key), build, "humaneval-repair")


def resolve_tasks(tasks: TaskSet | str | Path | None, sandbox: Any) -> TaskSet:
    """The env's task set from its ``tasks`` argument: ``None``/``"starter"``, ``"humaneval"``, a JSONL
    path, or a :class:`TaskSet` (tasks not yet normalised are validated here)."""
    if tasks is None or tasks == "starter":
        return starter_tasks(sandbox)
    if tasks == "humaneval":
        return humaneval_tasks(sandbox)
    if isinstance(tasks, str | Path):
        return load_task_file(tasks, sandbox)
    if isinstance(tasks, TaskSet):
        if all(is_normalised(t) for t in tasks):
            return tasks
        return TaskSet([t if is_normalised(t) else normalise_task(t, sandbox) for t in tasks], tasks.name)
    raise TypeError(f"tasks must be None, 'starter', 'humaneval', a JSONL path or a TaskSet, got {type(tasks).__name__}")


def parse_tests(task: Task) -> list[TestSpec]:
    """The normalised task's tests as :class:`TestSpec` objects."""
    return [TestSpec.from_dict(t, f"task {task.id!r}: tests[{i}]") for i, t in enumerate(task.data["tests"])]


def grade_task_code(sandbox: Any, task: Task, code: str, tests: list[TestSpec] | None = None) -> GradeReport:
    """Grade ``code`` on all of ``task``'s tests in a fresh workspace (for experts, audits, benchmarks)."""
    return grade(sandbox, code, tests or parse_tests(task), task.data["entry_point"],
                 imports=task.data.get("imports", ()), limits=VALIDATION_LIMITS)
