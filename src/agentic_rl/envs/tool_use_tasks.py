"""Task generation, question templates and task-data validation for ``tool-use-v0``.

Task ``data`` (what a user-written task file must hold; generated tasks hold all of it)::

    family     str   direct | calc | convert | lookup | lookup_calc | compare (other names: no habit but guessing)
    answer     number or str   the truth; numbers compare with tolerance 0.011, strings normalised
    kb         {entity: {field: value}}   the facts ``lookup`` can see in this task (default {})
    needed     [{"name": tool, "arguments": {...}}]   the minimal tool calls, in order (default [])
    habit_call {"name", "arguments"} or absent   the unneeded call of the ``direct`` habit
    q          {...} or absent   the structured question, used to re-render it under ``paraphrase``
    perturbation  str or absent   one of TASK_PERTURBATIONS, applied to this task's episodes when the env
               has no perturbation of its own: task variants for training on varied observations

Splits: ``train`` and ``test`` use disjoint fictional entities (no test entity appears in any train task)
and share no prompt. Everything is a deterministic function of ``seed``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from agentic_rl.envs.task_data import require, warn_unknown_keys
from agentic_rl.envs.tool_use_tools import (
    TOOL_ARGS,
    ToolFailure,
    calculate,
    convert,
    format_number,
)
from agentic_rl.tasks.core import Task, TaskFileError, TaskSet

#: family -> difficulty level
LEVELS: dict[str, int] = {"direct": 0, "calc": 1, "convert": 1, "lookup": 2, "lookup_calc": 3, "compare": 4}
FAMILIES: tuple[str, ...] = tuple(LEVELS)
#: perturbations a task may carry itself (``renamed_tools`` changes the env's tools, so only the env can)
TASK_PERTURBATIONS: tuple[str, ...] = ("paraphrase", "distractors", "reordered_results", "noisy_observation")

#: entity kind -> numeric fields and their value ranges
KINDS: dict[str, dict[str, tuple[int, int]]] = {
    "city": {"population": (1000, 99999), "area": (10, 999), "elevation": (5, 2999)},
    "company": {"employees": (10, 9999), "revenue": (100, 99999), "offices": (2, 99)},
    "product": {"price": (5, 999), "weight": (2, 499), "stock": (3, 999)},
}
_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u"]
_CODAS = ["", "", "n", "r", "l", "s"]
_MIDDLES = ["b", "d", "k", "l", "m", "n", "r", "t", "v", "tr", "dr"]
_ENDINGS = ["a", "o", "i", "is", "on", "en", "ar", "um"]

_CONVERSIONS = [("miles", "km"), ("km", "miles"), ("feet", "m"), ("m", "feet"), ("inches", "cm"),
                ("cm", "inches"), ("kg", "pounds"), ("pounds", "kg"), ("ounces", "g"),
                ("gallons", "liters"), ("liters", "gallons")]
_OP_WORDS = {"*": "times", "+": "plus", "-": "minus"}
_PARAPHRASE_CALC = {"*": "Multiply the {field} of {entity} by {k}.", "+": "Add {k} to the {field} of {entity}.",
                    "-": "Subtract {k} from the {field} of {entity}."}


# -- question templates -------------------------------------------------------------------------
def _join_names(names: Sequence[str], last: str) -> str:
    return ", ".join(names[:-1]) + f" {last} " + names[-1]


def render_prompt(family: str, q: dict[str, Any], paraphrase: bool = False) -> str:
    """The question for structured ``q``; ``paraphrase`` picks the alternative template (never used to
    generate tasks, so a paraphrased question is unseen in training)."""
    if family == "direct" and q["form"] == "fact":
        e, f, v = q["entity"], q["field"], q["value"]
        return (f"Given that {e} has a {f} of {v}, what is the {f} of {e}?" if paraphrase
                else f"{e}'s {f} is {v}. What is {e}'s {f}?")
    if family == "direct":
        expr = f"{q['a']} {q['op']} {q['b']}"
        return (f"We know {expr} equals {q['value']}. Compute {expr}." if paraphrase
                else f"{expr} = {q['value']}. What is {expr}?")
    if family == "calc":
        expr = f"{q['a']} {q['op']} {q['b']}"
        return f"Compute {expr}." if paraphrase else f"What is {expr}?"
    if family == "convert":
        return (f"How many {q['to']} is {q['value']} {q['from']}?" if paraphrase
                else f"Convert {q['value']} {q['from']} to {q['to']}.")
    if family == "lookup":
        return f"Find the {q['field']} of {q['entity']}." if paraphrase else f"What is the {q['field']} of {q['entity']}?"
    if family == "lookup_calc":
        if paraphrase:
            return _PARAPHRASE_CALC[q["op"]].format(**q)
        return f"What is the {q['field']} of {q['entity']} {_OP_WORDS[q['op']]} {q['k']}?"
    if family == "compare":
        names, larger = q["entities"], q["direction"] == "larger"
        if paraphrase:
            return f"Among {_join_names(names, 'and')}, which has the {'higher' if larger else 'lower'} {q['field']}?"
        return f"Which has the {q['direction']} {q['field']}: {_join_names(names, 'or')}?"
    raise ValueError(f"no template for family {family!r}")


# -- generation ---------------------------------------------------------------------------------
def _entity_names(rng: random.Random, count: int) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        parts = [rng.choice(_ONSETS), rng.choice(_VOWELS), rng.choice(_CODAS), rng.choice(_MIDDLES),
                 rng.choice(_ENDINGS)]
        names.add("".join(parts).capitalize())
    return sorted(names)


def build_knowledge_bases(rng: random.Random, per_kind: int, test_fraction: float) -> dict[str, dict[str, Any]]:
    """``{split: {kind: {entity: {field: value}}}}`` with disjoint entity names across splits."""
    names = _entity_names(rng, per_kind * len(KINDS))
    rng.shuffle(names)
    n_test = max(3, round(per_kind * test_fraction))
    kbs: dict[str, dict[str, Any]] = {"train": {}, "test": {}}
    for i, (kind, fields) in enumerate(KINDS.items()):
        chunk = names[i * per_kind:(i + 1) * per_kind]
        for split, members in (("test", chunk[:n_test]), ("train", chunk[n_test:])):
            kbs[split][kind] = {name: {f: rng.randint(*span) for f, span in fields.items()} for name in members}
    return kbs


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _arithmetic(rng: random.Random) -> tuple[int, str, int]:
    op = rng.choice("*+-")
    if op == "*":
        return rng.randint(100, 999), op, rng.randint(11, 99)
    if op == "+":
        return rng.randint(1000, 9999), op, rng.randint(1000, 9999)
    return rng.randint(1000, 9999), op, rng.randint(100, 999)


def _pick_entity(rng: random.Random, kb: dict[str, Any]) -> tuple[str, str, str, int]:
    kind = rng.choice(sorted(kb))
    entity = rng.choice(sorted(kb[kind]))
    field = rng.choice(sorted(kb[kind][entity]))
    return kind, entity, field, kb[kind][entity][field]


def _make(family: str, rng: random.Random, kb: dict[str, Any]) -> dict[str, Any]:
    """One task's data (with ``q``) for ``family``, drawing entities from the split's ``kb``."""
    if family in ("direct", "calc"):
        if family == "direct" and rng.random() < 0.5:
            kind, entity, field, value = _pick_entity(rng, kb)
            return {"q": {"form": "fact", "entity": entity, "field": field, "value": value}, "answer": value,
                    "kb": {entity: dict(kb[kind][entity])}, "needed": [],
                    "habit_call": _call("lookup", entity=entity, field=field)}
        a, op, b = _arithmetic(rng)
        result = int(calculate(f"{a} {op} {b}"))
        call = _call("calculator", expression=f"{a} {op} {b}")
        if family == "direct":
            return {"q": {"form": "calc", "a": a, "op": op, "b": b, "value": result}, "answer": result, "kb": {},
                    "needed": [], "habit_call": call}
        return {"q": {"a": a, "op": op, "b": b}, "answer": result, "kb": {}, "needed": [call]}
    if family == "convert":
        source, target = rng.choice(_CONVERSIONS)
        value = rng.randint(2, 999)
        call = _call("convert", value=value, from_unit=source, to_unit=target)
        return {"q": {"value": value, "from": source, "to": target}, "kb": {}, "needed": [call],
                "answer": convert(value, source, target)}
    if family in ("lookup", "lookup_calc"):
        kind, entity, field, value = _pick_entity(rng, kb)
        data = {"q": {"entity": entity, "field": field}, "answer": value, "kb": {entity: dict(kb[kind][entity])},
                "needed": [_call("lookup", entity=entity, field=field)]}
        if family == "lookup_calc":
            op = rng.choice("*+-")
            k = rng.randint(2, 9) if op == "*" else rng.randint(100, 999) if op == "+" else rng.randint(1, min(999, value - 1))
            data["q"].update(op=op, k=k)
            data["needed"].append(_call("calculator", expression=f"{value} {op} {k}"))
            data["answer"] = int(calculate(f"{value} {op} {k}"))
        return data
    if family == "compare":
        kind = rng.choice(sorted(kb))
        field = rng.choice(sorted(KINDS[kind]))
        count = 3 if rng.random() < 0.3 else 2
        while True:
            entities = rng.sample(sorted(kb[kind]), count)
            values = [kb[kind][e][field] for e in entities]
            if len(set(values)) == count:
                break
        direction = rng.choice(["larger", "smaller"])
        best = (max if direction == "larger" else min)(range(count), key=values.__getitem__)
        return {"q": {"entities": entities, "field": field, "direction": direction}, "answer": entities[best],
                "kb": {e: dict(kb[kind][e]) for e in entities},
                "needed": [_call("lookup", entity=e, field=field) for e in entities]}
    raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")


def generate_tasks(seed: int = 0, n_per_family: int = 60, test_fraction: float = 1 / 3,
                   families: Sequence[str] = FAMILIES) -> TaskSet:
    """``n_per_family`` tasks per family, ``test_fraction`` of them in ``test``, the rest in ``train``.

    Defaults give 240 train / 120 test tasks over 6 families and 5 levels. Train and test entities are
    disjoint, and no prompt appears twice. Same ``seed`` ⇒ the same task set.
    """
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown families {unknown}; valid: {', '.join(FAMILIES)}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = random.Random(seed)
    kbs = build_knowledge_bases(rng, per_kind=36, test_fraction=test_fraction)
    n_test = round(n_per_family * test_fraction)
    seen: set[str] = set()
    tasks: list[Task] = []
    for family in families:
        for split, count in (("train", n_per_family - n_test), ("test", n_test)):
            made, attempts = 0, 0
            while made < count:
                attempts += 1
                if attempts > 100 * count + 100:
                    raise RuntimeError(f"cannot generate {count} distinct {family} tasks for {split}")
                data = _make(family, rng, kbs[split])
                prompt = render_prompt(family, data["q"])
                if prompt in seen:
                    continue
                seen.add(prompt)
                data = {"family": family, **data}
                tasks.append(Task(f"{family}-{split}-{made:03d}", prompt, data, LEVELS[family], split,
                                  "tool-use-v0", (family,)))
                made += 1
    return TaskSet(tasks, name=f"tool-use-seed{seed}")


# -- validation ---------------------------------------------------------------------------------
#: the keys of ``data`` (module docstring); another key draws a warning (a typo would be silently ignored)
DATA_KEYS: tuple[str, ...] = ("family", "answer", "kb", "needed", "habit_call", "q", "perturbation")


def _check_call(call: Any, where: str, name: str) -> None:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(
            call.get("arguments", {}), dict):
        raise TaskFileError(f"{where}: field 'data.{name}' must be an object with 'name' and 'arguments'")
    tool = call["name"]
    if tool not in TOOL_ARGS:
        raise TaskFileError(f"{where}: field 'data.{name}.name' must be one of {', '.join(TOOL_ARGS)}, got {tool!r}")
    missing = [a for a in TOOL_ARGS[tool] if a not in call.get("arguments", {})]
    if missing:
        raise TaskFileError(f"{where}: field 'data.{name}.arguments' lacks {missing}")
    if tool == "calculator":
        try:
            calculate(str(call["arguments"]["expression"]))
        except ToolFailure as exc:
            raise TaskFileError(f"{where}: field 'data.{name}.arguments.expression': {exc}") from None


def _check_kb(kb: Any, where: str) -> None:
    if not isinstance(kb, dict) or not all(isinstance(v, dict) for v in kb.values()):
        raise TaskFileError(f"{where}: field 'data.kb' must map entity names to objects of fields")
    for entity, fields in kb.items():
        for name, value in fields.items():
            # lookup hands the value to the agent and calculator; a list or null there only fails mid-episode
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise TaskFileError(f"{where}: field 'data.kb.{entity}.{name}' must be a number or a string, "
                                    f"got {value!r:.60}")


def validate_task(task: Task, where: str) -> None:
    """Raise :class:`TaskFileError` naming ``where`` and the ``data`` field if ``task`` is unusable."""
    data = task.data
    warn_unknown_keys(data, DATA_KEYS, where)
    require(data, "family", str, where)
    require(data, "answer", (int, float, str), where, "a number or a string")
    _check_kb(data.get("kb", {}), where)
    needed = data.get("needed", [])
    if not isinstance(needed, list):
        raise TaskFileError(f"{where}: field 'data.needed' must be a list of tool calls")
    for i, call in enumerate(needed):
        _check_call(call, where, f"needed[{i}]")
    if "habit_call" in data:
        _check_call(data["habit_call"], where, "habit_call")
    if data.get("perturbation") is not None and data["perturbation"] not in TASK_PERTURBATIONS:
        raise TaskFileError(f"{where}: field 'data.perturbation' must be one of {', '.join(TASK_PERTURBATIONS)}, "
                            f"got {data['perturbation']!r}")
    q = data.get("q")
    if q is not None:
        try:
            render_prompt(data["family"], q)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise TaskFileError(f"{where}: field 'data.q' does not fit family {data['family']!r} ({exc})") from None


def format_value(value: Any) -> str:
    """How a KB value or tool result is written in observations."""
    return format_number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
