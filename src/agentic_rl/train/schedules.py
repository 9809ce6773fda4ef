"""Schedules: learning rate (warm-up, then constant / linear / cosine decay) and exploration decay."""

from __future__ import annotations

import math


def lr_factor(step: int, *, total_steps: int, warmup_steps: int = 0, schedule: str = "constant",
              min_ratio: float = 0.1) -> float:
    """Multiplier of the base LR at optimizer step ``step`` (0-based): linear warm-up from ~0 over
    ``warmup_steps``, then ``constant``, ``linear`` or ``cosine`` decay to ``min_ratio`` at ``total_steps``."""
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, max(0.0, (step - warmup_steps) / span))
    if schedule == "linear":
        return 1.0 - (1.0 - min_ratio) * progress
    if schedule == "cosine":
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown lr_schedule {schedule!r}; valid: constant, linear, cosine")


def decayed(start: float, final: float | None, iteration: int, decay_iterations: int) -> float:
    """Linear decay from ``start`` (iteration 0) to ``final`` (at ``decay_iterations`` and after).
    ``final=None`` keeps ``start`` (no decay)."""
    if final is None or decay_iterations <= 0:
        return start
    progress = min(1.0, iteration / decay_iterations)
    return start + (final - start) * progress
