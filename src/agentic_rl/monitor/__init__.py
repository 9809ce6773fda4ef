"""Monitoring: metric sinks (JSONL, TensorBoard, W&B, MLflow), the live display, the HTML report, ``doctor``."""

from agentic_rl.monitor.live import LiveDisplay
from agentic_rl.monitor.logger import MetricsLogger
from agentic_rl.monitor.rollout_metrics import trajectory_metrics

__all__ = ["LiveDisplay", "MetricsLogger", "trajectory_metrics"]
