"""``MetricsLogger``: everything a training run records, written into its run directory.

Files (the run-directory layout that ``evaluate``, ``report`` and ``doctor`` read)::

    run_dir/metrics.jsonl            one object per iteration: {"iteration", "time", <metric>: value}
    run_dir/eval.jsonl               one object per evaluation: {"iteration", "time", "split", ...}
    run_dir/events.jsonl             {"time", "iteration", "event", ...}: stops, guard trips, promotions
    run_dir/histograms.jsonl         {"iteration", "name", "count", "min", "max", "mean", "edges", "counts"}
    run_dir/trajectories/iter_000005.jsonl   a sample of that iteration's trajectories
    run_dir/tb/                      TensorBoard event files (when ``tensorboard=True``)

JSONL is always written, one flushed line per call, so a killed run leaves at most one torn last line
(the readers skip it). Non-finite metric values are written as ``null`` and reported once per iteration
as a ``non_finite`` event (strict JSON has no NaN, and a NaN loss is something ``doctor`` must see).
W&B and MLflow are used only when enabled; an enabled sink whose package is missing is reported as a
``sink_unavailable`` event plus a warning, and the run goes on with the other sinks.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from agentic_rl.monitor.sinks import MlflowSink, Sink, SinkUnavailable, TensorBoardSink, WandbSink

if TYPE_CHECKING:
    from agentic_rl.rollout.trajectory import Trajectory

logger = logging.getLogger(__name__)

HISTOGRAM_BINS = 20


def _as_number(value: Any) -> float | int | None | Any:
    """A JSON-friendly scalar: numbers (incl. numpy/torch scalars) become float/int, NaN/inf become None."""
    if isinstance(value, bool):
        return value
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (ValueError, RuntimeError):  # a tensor with more than one element: not a scalar metric
            return repr(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


class MetricsLogger:
    """Write a run's metrics, evaluations, events and trajectory samples to ``run_dir`` (and sinks).

    ``wandb`` / ``mlflow`` are ``False`` (off), ``True`` (defaults) or a dict of options (W&B: passed to
    ``wandb.init``; MLflow: ``tracking_uri``, ``experiment``, ``run_name``). ``config`` (optional) is
    recorded in those sinks and TensorBoard. The logger owns its files: call :meth:`close` (or use it as
    a context manager) when the run ends.
    """

    def __init__(self, run_dir: str | Path, tensorboard: bool = True, wandb: bool | dict = False,
                 mlflow: bool | dict = False, config: Mapping[str, Any] | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, IO[str]] = {}
        self.sinks: list[Sink] = []
        for name in ("metrics.jsonl", "events.jsonl"):  # present from the start: absence means "never started"
            (self.run_dir / name).touch()
        if tensorboard:
            self._add_sink("tensorboard", lambda: TensorBoardSink(self.run_dir / "tb"))
        if wandb:
            options = wandb if isinstance(wandb, dict) else {}
            self._add_sink("wandb", lambda: WandbSink(self.run_dir, options, config))
        if mlflow:
            options = mlflow if isinstance(mlflow, dict) else {}
            self._add_sink("mlflow", lambda: MlflowSink(self.run_dir, options, config))
        if config is not None:
            self._sink_call("text", "config", json.dumps(dict(config), indent=2, default=str), 0)

    # -- public API ---------------------------------------------------------------------------
    def log(self, iteration: int, metrics: Mapping[str, Any]) -> None:
        """Append one iteration's metrics to ``metrics.jsonl`` and send the numeric ones to the sinks."""
        row: dict[str, Any] = {"iteration": int(iteration), "time": time.time()}
        non_finite: list[str] = []
        scalars: dict[str, float] = {}
        for name, raw in metrics.items():
            value = _as_number(raw)
            row[str(name)] = value
            if value is None and raw is not None:
                non_finite.append(str(name))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                scalars[str(name)] = float(value)
        self._write("metrics.jsonl", row)
        if non_finite:
            self.event(iteration, "non_finite", metrics=sorted(non_finite))
        if scalars:
            self._sink_call("scalars", scalars, int(iteration))

    def log_histogram(self, name: str, values: Sequence[float], iteration: int) -> None:
        """Record the distribution of ``values`` (e.g. per-episode rewards) as buckets + summary."""
        finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
        if not finite:
            return
        low, high = min(finite), max(finite)
        width = (high - low) / HISTOGRAM_BINS or 1.0
        counts = [0] * HISTOGRAM_BINS
        for v in finite:
            counts[min(int((v - low) / width), HISTOGRAM_BINS - 1)] += 1
        edges = [low + i * width for i in range(HISTOGRAM_BINS + 1)]
        self._write("histograms.jsonl", {
            "iteration": int(iteration), "name": name, "count": len(finite), "min": low, "max": high,
            "mean": sum(finite) / len(finite), "edges": edges, "counts": counts,
        })
        self._sink_call("histogram", name, finite, int(iteration))

    def log_eval(self, iteration: int, row: Mapping[str, Any]) -> None:
        """Append one evaluation (``split``, ``perturbation``, ``success_rate``, CI, ...) to ``eval.jsonl``.

        Numeric fields also go to the sinks as ``eval/<split>[/<perturbation>]/<field>``.
        """
        record: dict[str, Any] = {"iteration": int(iteration), "time": time.time()}
        record.update({str(k): _json_ready(v) for k, v in row.items()})
        self._write("eval.jsonl", record)
        prefix = f"eval/{record.get('split') or 'eval'}"
        if record.get("perturbation"):
            prefix += f"/{record['perturbation']}"
        scalars = {f"{prefix}/{k}": float(v) for k, v in record.items()
                   if k not in ("iteration", "time") and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if scalars:
            self._sink_call("scalars", scalars, int(iteration))

    def event(self, iteration: int, event: str, **data: Any) -> None:
        """Append a notable event (``stop``, ``guard_trip``, ``promotion``, ``best``...) to ``events.jsonl``."""
        record = {"time": time.time(), "iteration": int(iteration), "event": event}
        record.update({k: _json_ready(v) for k, v in data.items()})
        self._write("events.jsonl", record)

    def log_trajectories(self, iteration: int, trajs: Iterable[Trajectory], sample: int = 16,
                         keep_ledger: bool = False) -> Path | None:
        """Write a sample of ``trajs`` to ``trajectories/iter_<iteration:06d>.jsonl``; return its path.

        The sample is deterministic and spread over the reward range (best and worst episodes included).
        Unless ``keep_ledger``, token ids and logprobs are dropped: the files are for reading, not training,
        and would otherwise grow by megabytes per iteration.
        """
        chosen = sample_spread(list(trajs), sample)
        if not chosen:
            return None
        path = self.run_dir / "trajectories" / f"iter_{int(iteration):06d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            for traj in chosen:
                raw = traj.to_dict()
                if not keep_ledger:
                    raw["segments"] = []
                    for turn in raw["turns"]:
                        turn["token_ids"], turn["logprobs"] = [], []
                fh.write(json.dumps(raw, ensure_ascii=False) + "\n")
        return path

    def close(self) -> None:
        """Flush and close every file and sink. Safe to call twice."""
        for fh in self._files.values():
            fh.close()
        self._files.clear()
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # a sink failing at shutdown must not lose the JSONL files
                logger.warning("closing sink %s failed: %s", type(sink).__name__, exc)
        self.sinks.clear()

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------
    def _add_sink(self, name: str, build: Any) -> None:
        try:
            self.sinks.append(build())
        except SinkUnavailable as exc:
            logger.warning("%s", exc)
            self.event(0, "sink_unavailable", sink=name, reason=str(exc))

    def _sink_call(self, method: str, *args: Any) -> None:
        for sink in list(self.sinks):
            try:
                getattr(sink, method)(*args)
            except Exception as exc:  # a remote sink going down must not stop training
                logger.warning("sink %s failed on %s (%s); disabling it", type(sink).__name__, method, exc)
                self.sinks.remove(sink)
                self.event(int(args[-1]) if isinstance(args[-1], int) else 0, "sink_failed",
                           sink=type(sink).__name__, reason=str(exc))

    def _write(self, filename: str, record: Mapping[str, Any]) -> None:
        fh = self._files.get(filename)
        if fh is None:
            fh = self._files[filename] = (self.run_dir / filename).open("a", encoding="utf-8")
        fh.write(json.dumps(record, ensure_ascii=False, default=str, allow_nan=False) + "\n")
        fh.flush()


def _json_ready(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return _as_number(value)


def sample_spread(trajs: Sequence[Trajectory], n: int) -> list[Trajectory]:
    """Up to ``n`` trajectories evenly spaced over the reward ranking (stable for equal rewards)."""
    if n <= 0 or not trajs:
        return []
    if len(trajs) <= n:
        return list(trajs)
    ranked = sorted(range(len(trajs)), key=lambda i: (-trajs[i].total_reward, i))
    if n == 1:
        return [trajs[ranked[0]]]
    picks = sorted({ranked[round(k * (len(ranked) - 1) / (n - 1))] for k in range(n)})
    return [trajs[i] for i in picks]
