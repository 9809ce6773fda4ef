"""Composable reward terms.

A step's reward is the sum of named terms (``info["reward_terms"]``). The helpers here build, merge and
neutralise term dicts so every env reports the same names the same way:

- ``outcome`` or ``outcome/<part>``: what the task's independent check paid;
- ``step_cost``: the per-step cost; ``invalid_action``: penalty for an unusable action;
- ``shaping/<name>``: shaping terms; ``hacking``: the penalty applied when a reward hack was flagged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def combine(*parts: Mapping[str, float]) -> dict[str, float]:
    """Merge term dicts, summing terms that share a name. Drops nothing (zero terms stay visible)."""
    out: dict[str, float] = {}
    for part in parts:
        for name, value in part.items():
            if not math.isfinite(value):
                raise ValueError(f"reward term {name!r} is not finite: {value!r}")
            out[name] = out.get(name, 0.0) + float(value)
    return out


def total(terms: Mapping[str, float]) -> float:
    """The reward a term dict stands for (their sum)."""
    return float(sum(terms.values()))


def neutralise(terms: Mapping[str, float], prefix: str = "outcome") -> dict[str, float]:
    """The same terms with every ``prefix``-named term set to 0 (kept, so logs show what was withheld)."""
    return {name: (0.0 if name == prefix or name.startswith(prefix + "/") else value)
            for name, value in terms.items()}


def step_cost(cost: float) -> dict[str, float]:
    """The per-step cost term (``cost`` is the magnitude; the term is ``-cost``)."""
    return {"step_cost": -abs(float(cost))} if cost else {}
