"""MetricsLogger sinks (JSONL + TensorBoard read back with tensorboard's own reader), LiveDisplay, and
per-batch rollout metrics."""

from __future__ import annotations

import io
import json

import pytest
from synthetic_runs import episode

from agentic_rl.monitor import LiveDisplay, MetricsLogger, trajectory_metrics
from agentic_rl.monitor.rundir import load_run
from agentic_rl.rollout.trajectory import Trajectory, Turn, load_jsonl


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_jsonl_files_follow_the_run_dir_layout(tmp_path):
    with MetricsLogger(tmp_path, tensorboard=False) as log:
        log.log(0, {"reward/mean": 0.25, "loss/total": float("nan"), "note": "warmup"})
        log.log(1, {"reward/mean": 0.5})
        log.log_eval(1, {"split": "test", "perturbation": None, "success_rate": 0.5, "per_level": {"0": 0.5}})
        log.event(1, "best", success_rate=0.5)
    metrics = _rows(tmp_path / "metrics.jsonl")
    assert [m["iteration"] for m in metrics] == [0, 1]
    assert metrics[0]["reward/mean"] == 0.25 and metrics[0]["loss/total"] is None and metrics[0]["note"] == "warmup"
    assert all(isinstance(m["time"], float) for m in metrics)
    assert _rows(tmp_path / "eval.jsonl")[0]["success_rate"] == 0.5
    events = _rows(tmp_path / "events.jsonl")
    assert [e["event"] for e in events] == ["non_finite", "best"]
    assert events[0]["metrics"] == ["loss/total"]


def test_tensorboard_scalars_and_histograms_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with MetricsLogger(tmp_path) as log:
        for i in range(3):
            log.log(i, {"reward/mean": 0.1 * i, "policy/entropy": 1.0 - 0.1 * i})
        log.log_histogram("reward/episodes", [0.0, 0.5, 1.0, 1.0], 2)
        log.log_eval(2, {"split": "test", "success_rate": 0.75})
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    rewards = acc.Scalars("reward/mean")
    assert [e.step for e in rewards] == [0, 1, 2]
    assert [round(e.value, 6) for e in rewards] == [0.0, 0.1, 0.2]
    assert acc.Scalars("eval/test/success_rate")[0].value == 0.75
    histogram = acc.Histograms("reward/episodes")[0]
    assert histogram.step == 2 and histogram.histogram_value.num == 4
    assert histogram.histogram_value.max == 1.0
    hist_rows = _rows(tmp_path / "histograms.jsonl")
    assert hist_rows[0]["count"] == 4 and sum(hist_rows[0]["counts"]) == 4


def test_trajectory_sample_keeps_best_and_worst_and_drops_the_ledger(tmp_path):
    trajs = [Trajectory(task_id=f"t{i}", turns=[Turn("o", "a", token_ids=[1, 2], logprobs=[-0.1, -0.2],
                                                     reward=float(i))]) for i in range(10)]
    with MetricsLogger(tmp_path, tensorboard=False) as log:
        path = log.log_trajectories(7, trajs, sample=3)
    assert path.name == "iter_000007.jsonl"
    loaded = load_jsonl(path)
    assert [t.task_id for t in loaded] == ["t0", "t5", "t9"]  # spread over the reward range, original order
    assert all(t.turns[0].token_ids == [] for t in loaded)
    assert load_run(tmp_path).trajectories[7][0].turns[0].action == "a"


def test_enabled_but_missing_sink_is_reported_not_fatal(tmp_path):
    pytest.importorskip("tensorboard")
    try:
        import wandb  # noqa: F401

        pytest.skip("wandb is installed: the missing-package path cannot be exercised")
    except ImportError:
        pass
    with MetricsLogger(tmp_path, tensorboard=False, wandb={"mode": "offline"}) as log:
        log.log(0, {"reward/mean": 1.0})
    events = _rows(tmp_path / "events.jsonl")
    assert events[0]["event"] == "sink_unavailable" and events[0]["sink"] == "wandb"
    assert "pip install" in events[0]["reason"]
    assert _rows(tmp_path / "metrics.jsonl")[0]["reward/mean"] == 1.0


def test_live_display_plain_mode_prints_progress_and_key_figures():
    stream = io.StringIO()
    with LiveDisplay(10, "rl", stream=stream) as live:  # StringIO is not a TTY → plain lines
        live.update(0, {"reward/mean": 0.5, "zzz/other": 3.0}, stage="rollout")
        live.update(4, {"reward/mean": 0.75, "success/train": 0.25}, stage="train")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[rl] it 1/10 stage=rollout")
    assert "reward/mean=0.5" in lines[0]
    assert "it 5/10" in lines[1] and lines[1].index("reward/mean") < lines[1].index("success/train")


def test_live_display_rich_mode_shows_bar_stage_and_figures():
    stream = io.StringIO()
    with LiveDisplay(3, "rl", plain=False, stream=stream) as live:
        live.update(2, {"reward/mean": 0.7}, stage="train")
    final = stream.getvalue()
    assert "rl · train" in final and "3/3" in final and "reward/mean" in final and "0.7" in final


def test_trajectory_metrics_rates_and_terms():
    ok = episode("a", success=True)
    bad = episode("b", success=False, actions=["garbage", "garbage", "<answer>1</answer>"], error="parse_error")
    crashed = Trajectory(task_id="c", termination="error:timeout", turns=[
        Turn("o", '<tool>{"name": "x"}</tool>', info={"action_kind": "tool_call", "error": "unknown_tool"})])
    m = trajectory_metrics([ok, bad, crashed])
    assert m["success/train"] == pytest.approx(1 / 3)
    assert m["reward/max"] == pytest.approx(0.98) and m["reward/min"] == pytest.approx(-0.03)
    assert m["rollout/turns"] == pytest.approx(2.0)
    assert m["rollout/parse_error_rate"] == pytest.approx(3 / 6)
    assert m["rollout/tool_error_rate"] == pytest.approx(1 / 2)  # one of two tool calls failed
    assert m["rollout/timeout_rate"] == pytest.approx(1 / 3)
    assert m["reward_terms/outcome"] == pytest.approx(1 / 3)
    assert m["actions/invalid"] == pytest.approx(3 / 6)
    assert sum(v for k, v in m.items() if k.startswith("actions/")) == pytest.approx(1.0)
    assert m["rollout/turns_success"] == ok.num_turns and m["rollout/explored_turns"] == 0.0
    assert trajectory_metrics([]) == {}
    assert "rollout/turns_success" not in trajectory_metrics([bad])  # no success: no efficiency figure
    bad.turns[0].explored = "<answer>"
    assert trajectory_metrics([bad])["rollout/explored_turns"] == pytest.approx(1 / 3)


def test_wandb_and_mlflow_sinks_receive_metrics_with_the_iteration_as_step(tmp_path, monkeypatch):
    """The packages are optional; stand-ins record what the logger sends to them."""
    import sys
    import types

    calls: list[tuple] = []

    class FakeRun:
        summary: dict = {}

        def log(self, data, step):
            calls.append(("wandb.log", dict(data), step))

        def finish(self):
            calls.append(("wandb.finish",))

    wandb = types.SimpleNamespace(init=lambda **kw: calls.append(("wandb.init", kw)) or FakeRun(),
                                  Histogram=lambda values: ("hist", len(values)))
    mlflow = types.SimpleNamespace(
        set_tracking_uri=lambda uri: calls.append(("mlflow.uri", uri)), set_experiment=lambda name: None,
        start_run=lambda run_name: calls.append(("mlflow.start", run_name)), log_params=lambda p: None,
        log_metrics=lambda m, step: calls.append(("mlflow.log", dict(m), step)), log_text=lambda *a: None,
        end_run=lambda: calls.append(("mlflow.end",)))
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.setitem(sys.modules, "mlflow", mlflow)
    with MetricsLogger(tmp_path / "run", tensorboard=False, wandb={"project": "p", "mode": "offline"},
                       mlflow={"tracking_uri": "file:///tmp/x"}, config={"train": {"lr": 1e-5}}) as log:
        log.log(4, {"reward/mean": 0.5, "note": "text is not a metric"})
    assert ("wandb.log", {"reward/mean": 0.5}, 4) in calls
    assert ("mlflow.log", {"reward/mean": 0.5}, 4) in calls
    init = next(c for c in calls if c[0] == "wandb.init")[1]
    assert init["project"] == "p" and init["config"] == {"train": {"lr": 1e-5}}
    assert ("wandb.finish",) in calls and ("mlflow.end",) in calls
