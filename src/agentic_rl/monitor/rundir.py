"""Reading a run directory the way ``report`` and ``doctor`` need it: whatever exists, and what is missing.

A killed run leaves torn last lines, no ``eval.jsonl``, no checkpoints; a wrong path leaves nothing.
:func:`load_run` never raises for those: it returns a :class:`RunData` whose ``notes`` say what was
missing or skipped, so the report and the doctor can still show what is there.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_rl.rollout.trajectory import Trajectory

_ITER_FILE = re.compile(r"iter_(\d+)\.jsonl$")
EXPECTED = ("config.yaml", "metrics.jsonl", "eval.jsonl", "events.jsonl", "trajectories/")


@dataclass
class RunData:
    """Everything readable in a run dir. ``notes`` lists missing files and skipped lines, in plain words."""

    run_dir: Path
    exists: bool = False
    config: dict[str, Any] | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    histograms: list[dict[str, Any]] = field(default_factory=list)
    trajectories: dict[int, list[Trajectory]] = field(default_factory=dict)  # iteration -> sampled episodes
    compare: dict[str, Any] | None = None  # compare.json written by `agentic-rl eval --compare --out RUN_DIR`
    notes: list[str] = field(default_factory=list)

    @property
    def missing(self) -> list[str]:
        """The expected files/folders that are absent."""
        return [n.split(":", 1)[1].strip() for n in self.notes if n.startswith("missing:")]

    def metric_names(self) -> list[str]:
        names: set[str] = set()
        for row in self.metrics:
            names.update(k for k in row if k not in ("iteration", "time"))
        return sorted(names)

    def series(self, name: str) -> list[tuple[int, float]]:
        """``(iteration, value)`` of a metric, skipping rows where it is absent, null or non-numeric."""
        out = []
        for row in self.metrics:
            value = row.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out.append((int(row.get("iteration", len(out))), float(value)))
        return out

    def null_metrics(self) -> dict[str, list[int]]:
        """Metrics logged as ``null`` (non-finite when written), with their iterations."""
        out: dict[str, list[int]] = {}
        for row in self.metrics:
            for key, value in row.items():
                if value is None:
                    out.setdefault(key, []).append(int(row.get("iteration", -1)))
        return out

    def all_trajectories(self) -> list[tuple[int, Trajectory]]:
        return [(it, t) for it in sorted(self.trajectories) for t in self.trajectories[it]]

    @property
    def last_iteration(self) -> int | None:
        its = [int(r["iteration"]) for r in self.metrics if isinstance(r.get("iteration"), int)]
        return max(its) if its else None


def read_jsonl(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a torn last line is skipped and noted, as are other undecodable lines."""
    rows: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        notes.append(f"unreadable: {path.name} ({exc})")
        return rows
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            where = "torn last line (killed writer?)" if i == len(lines) - 1 else f"undecodable line {i + 1}"
            notes.append(f"skipped: {path.name}: {where}")
            continue
        if isinstance(raw, dict):
            rows.append(raw)
        else:
            notes.append(f"skipped: {path.name}:{i + 1}: not a JSON object")
    return rows


def _load_trajectories(folder: Path, notes: list[str]) -> dict[int, list[Trajectory]]:
    out: dict[int, list[Trajectory]] = {}
    for path in sorted(folder.glob("iter_*.jsonl")):
        match = _ITER_FILE.search(path.name)
        if not match:
            continue
        trajs = []
        for raw in read_jsonl(path, notes):
            try:
                trajs.append(Trajectory.from_dict(raw))
            except (TypeError, ValueError) as exc:
                notes.append(f"skipped: {path.name}: a trajectory with unexpected fields ({exc})")
        out[int(match.group(1))] = trajs
    return out


def load_run(run_dir: str | Path) -> RunData:
    """Read ``run_dir`` (see the module docstring); never raises for missing or torn files."""
    data = RunData(Path(run_dir))
    root = data.run_dir
    data.exists = root.is_dir()
    if not data.exists:
        data.notes.append(f"missing: {root} (no such directory)")
        return data
    config_path = root / "config.yaml"
    if config_path.exists():
        try:
            import yaml

            loaded = yaml.safe_load(config_path.read_text(encoding="utf-8"))
            data.config = loaded if isinstance(loaded, dict) else None
        except Exception as exc:  # a half-written YAML file must not stop the report
            data.notes.append(f"unreadable: config.yaml ({type(exc).__name__}: {exc})"[:300])
    else:
        data.notes.append("missing: config.yaml")
    for name, attr in (("metrics.jsonl", "metrics"), ("eval.jsonl", "evals"), ("events.jsonl", "events"),
                       ("histograms.jsonl", "histograms")):
        path = root / name
        if path.exists():
            setattr(data, attr, read_jsonl(path, data.notes))
        elif name in EXPECTED:
            data.notes.append(f"missing: {name}")
    if (root / "trajectories").is_dir():
        data.trajectories = _load_trajectories(root / "trajectories", data.notes)
    else:
        data.notes.append("missing: trajectories/")
    compare = root / "compare.json"
    if compare.exists():
        try:
            data.compare = json.loads(compare.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            data.notes.append("skipped: compare.json (not valid JSON)")
    return data


def checkpoints(run_dir: Path) -> list[str]:
    """Names of the checkpoint folders in a run (``best``, ``last``, ``iter_000005``...)."""
    folder = run_dir / "checkpoints"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def config_get(config: dict[str, Any] | None, *path: str, default: Any = None) -> Any:
    """``config[path[0]][path[1]]...`` or ``default`` when any level is absent."""
    node: Any = config
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def numbers(values: Iterable[Any]) -> list[float]:
    """The finite numbers among ``values``."""
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
