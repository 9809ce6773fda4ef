"""``LiveDisplay``: a progress bar with ETA and the key figures of a running training loop.

On a terminal it is a ``rich`` live panel redrawn in place. When the output is not a terminal (CI, a
pipe, a log file) or ``$CI`` is set, it prints one plain line per update instead, so logs stay readable.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

#: Metrics shown first when present, in this order; others fill the remaining slots alphabetically.
KEY_FIGURES = (
    "reward/mean", "success/train", "success/heldout", "curriculum/level", "policy/entropy", "policy/kl",
    "loss/total", "optim/grad_norm", "rollout/turns", "rollout/response_tokens", "perf/rollout_tok_s",
)
MAX_FIGURES = 8


def key_figures(metrics: Mapping[str, Any], limit: int = MAX_FIGURES) -> list[tuple[str, str]]:
    """The (name, formatted value) pairs worth showing, most important first."""
    numeric = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    names = [k for k in KEY_FIGURES if k in numeric]
    names += sorted(k for k in numeric if k not in names and k not in ("iteration", "time"))
    return [(name, _fmt(numeric[name])) for name in names[:limit]]


def _fmt(value: float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.4g}"


def _eta(start: float, done: int, total: int) -> str:
    if done <= 0 or total <= 0:
        return "?"
    seconds = (time.monotonic() - start) / done * max(total - done, 0)
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}" if hours else f"{minutes}:{sec:02d}"


class LiveDisplay:
    """``with LiveDisplay(total, title) as live: live.update(iteration, metrics, stage)``.

    ``iteration`` counts from 0 or 1 — the display shows ``iteration + 1`` of ``total`` done when
    ``zero_based`` (the default). ``plain=None`` decides automatically (not a TTY or ``$CI`` set → plain).
    """

    def __init__(self, total_iterations: int, title: str = "training", *, plain: bool | None = None,
                 stream: IO[str] | None = None, zero_based: bool = True):
        self.total = max(int(total_iterations), 0)
        self.title = title
        self.stream = stream or sys.stdout
        is_tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.plain = plain if plain is not None else (not is_tty or bool(os.environ.get("CI")))
        self.zero_based = zero_based
        self._start = time.monotonic()
        self._live: Any = None
        self._progress: Any = None
        self._task: Any = None
        self.last_line = ""

    def __enter__(self) -> LiveDisplay:
        self._start = time.monotonic()
        if not self.plain:
            from rich.console import Console
            from rich.live import Live
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            console = Console(file=self.stream)
            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("ETA"), TimeRemainingColumn(), console=console)
            self._task = self._progress.add_task(self.title, total=self.total or None)
            self._live = Live(self._progress, console=console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def update(self, iteration: int, metrics: Mapping[str, Any] | None = None, stage: str = "") -> None:
        """Show progress after ``iteration`` with its ``metrics`` while in ``stage`` (rollout/train/eval)."""
        done = int(iteration) + (1 if self.zero_based else 0)
        figures = key_figures(metrics or {})
        if self.plain:
            parts = [f"[{self.title}] it {done}/{self.total or '?'}"]
            if stage:
                parts.append(f"stage={stage}")
            parts.append(f"eta={_eta(self._start, done, self.total)}")
            parts += [f"{name}={value}" for name, value in figures]
            self.last_line = " ".join(parts)
            print(self.last_line, file=self.stream, flush=True)
            return
        from rich.console import Group
        from rich.table import Table

        table = Table(show_header=False, box=None, padding=(0, 2))
        for name, value in figures:
            table.add_row(name, value)
        description = f"{self.title}" + (f" · {stage}" if stage else "")
        self._progress.update(self._task, completed=done, description=description)
        self._live.update(Group(self._progress, table))

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None
