"""Optional metric sinks behind :class:`~agentic_rl.monitor.logger.MetricsLogger`: TensorBoard, W&B, MLflow.

Each sink imports its library lazily, so a run that does not enable a sink never pays for (or needs) it.
A sink takes only flat, finite float metrics; the logger filters them before calling it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class Sink(Protocol):
    """What a metric backend must offer. ``step`` is always the training iteration."""

    def scalars(self, metrics: Mapping[str, float], step: int) -> None: ...

    def histogram(self, name: str, values: Sequence[float], step: int) -> None: ...

    def text(self, name: str, text: str, step: int) -> None: ...

    def close(self) -> None: ...


class SinkUnavailable(RuntimeError):
    """A configured sink's library is not installed (the message says what to install)."""


class TensorBoardSink:
    """Event files under ``log_dir`` (readable by TensorBoard and its ``EventAccumulator``)."""

    def __init__(self, log_dir: str | Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # tensorboard is a core dependency, but be explicit if it is gone
            raise SinkUnavailable(f"TensorBoard logging needs the 'tensorboard' package: {exc}") from exc
        self._writer = SummaryWriter(log_dir=str(log_dir))

    def scalars(self, metrics: Mapping[str, float], step: int) -> None:
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, global_step=step)
        self._writer.flush()

    def histogram(self, name: str, values: Sequence[float], step: int) -> None:
        import numpy as np

        self._writer.add_histogram(name, np.asarray(values, dtype=np.float64), global_step=step)

    def text(self, name: str, text: str, step: int) -> None:
        self._writer.add_text(name, text, global_step=step)

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()


class WandbSink:
    """Weights & Biases. ``options`` are passed to ``wandb.init`` (project, entity, mode, name, ...)."""

    def __init__(self, run_dir: Path, options: Mapping[str, Any], config: Mapping[str, Any] | None = None):
        try:
            import wandb
        except ImportError as exc:
            raise SinkUnavailable("W&B logging needs the 'wandb' package: pip install 'agentic-rl[wandb]'") from exc
        self._wandb = wandb
        kwargs = {"dir": str(run_dir), "name": run_dir.name, **dict(options)}
        if config is not None:
            kwargs.setdefault("config", dict(config))
        self._run = wandb.init(**kwargs)

    def scalars(self, metrics: Mapping[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def histogram(self, name: str, values: Sequence[float], step: int) -> None:
        self._run.log({name: self._wandb.Histogram(list(values))}, step=step)

    def text(self, name: str, text: str, step: int) -> None:
        self._run.summary[name] = text

    def close(self) -> None:
        self._run.finish()


class MlflowSink:
    """MLflow. ``options`` may hold ``tracking_uri``, ``experiment`` and ``run_name``."""

    def __init__(self, run_dir: Path, options: Mapping[str, Any], config: Mapping[str, Any] | None = None):
        try:
            import mlflow
        except ImportError as exc:
            raise SinkUnavailable("MLflow logging needs the 'mlflow' package: pip install 'agentic-rl[mlflow]'") from exc
        self._mlflow = mlflow
        if options.get("tracking_uri"):
            mlflow.set_tracking_uri(options["tracking_uri"])
        if options.get("experiment"):
            mlflow.set_experiment(options["experiment"])
        self._run = mlflow.start_run(run_name=options.get("run_name", run_dir.name))
        if config:
            flat = {k: str(v)[:500] for k, v in _flatten(config).items()}  # MLflow caps param length
            mlflow.log_params(flat)

    def scalars(self, metrics: Mapping[str, float], step: int) -> None:
        self._mlflow.log_metrics(dict(metrics), step=step)

    def histogram(self, name: str, values: Sequence[float], step: int) -> None:
        return None  # MLflow has no histogram type; the JSONL file keeps the buckets

    def text(self, name: str, text: str, step: int) -> None:
        self._mlflow.log_text(text, f"{name.replace('/', '_')}_{step}.txt")

    def close(self) -> None:
        self._mlflow.end_run()


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out
