"""The demo's --quick path end to end on a tiny random model, so `make demo` cannot rot."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from rich.console import Console

from agentic_rl.demo import QUICK, DemoSettings, build_tasks, demonstration_tasks, parse_settings, run_demo


def test_quick_demo_runs_every_stage_on_a_tiny_model(tiny_model_path, tmp_path):
    tiny = dict(run_dir=str(tmp_path / "demo"), model=str(tiny_model_path), test_tasks_per_family=1, demos=4,
                rl_iterations=1, tasks_per_iteration=2, group_size=2, eval_every=1, eval_tasks=2, max_new_tokens=6,
                max_turns=2, trainable_layers=1, teacher_habits={"direct": 0.0})
    settings = replace(DemoSettings(), quick=True, **{**QUICK, **tiny})
    console = Console(record=True, width=160)
    result = run_demo(settings, console=console)

    stages = [r.stage for r in result.rows]
    assert stages[0] == "base model" and stages[1].startswith("teacher")
    assert {"SFT (greedy)", "RL (greedy)"} <= set(stages)
    teacher = result.rows[1]
    assert 0.0 < teacher.success < 1.0  # the imperfect teacher solves some held-out tasks, not all
    assert teacher.unneeded_steps == 0  # teacher_habits: it never checks a `direct` value with a tool
    assert result.row("RL (greedy)").perturbed is not None  # robustness measured on the perturbation
    for row in result.rows:  # success per family: which kinds of question the policy gets right
        assert set(row.by_family) == set(settings.families)
        assert sum(row.by_family.values()) / len(row.by_family) == pytest.approx(row.success)
    assert result.report is not None and result.report.exists() and "<svg" in result.report.read_text()
    saved = json.loads((tmp_path / "demo" / "demo.json").read_text())
    assert [r["stage"] for r in saved["rows"]] == stages
    printed = console.export_text()
    assert "imitation → strategy" in printed and "agentic-rl doctor" in printed
    assert "when to call which tool" in printed and "lookup_calc" in printed and "unneeded" in printed


def test_settings_overrides_are_checked():
    assert parse_settings(["--quick", "--set", "rl_iterations=2"]).rl_iterations == 2
    assert parse_settings(["--set", "rl_trainable_layers=8"]).rl_trainable_layers == 8  # an optional knob
    assert parse_settings(["--set", "rl_trainable_layers=null"]).rl_trainable_layers is None
    with pytest.raises(SystemExit):
        parse_settings(["--set", "rl_trainable_layers=half"])
    with pytest.raises(SystemExit):
        parse_settings(["--set", "no_such_knob=1"])
    with pytest.raises(SystemExit):
        parse_settings(["--set", "rl_iterations=many"])
    assert parse_settings(["--set", "teacher_habits={direct: 1.0}"]).teacher_habits == {"direct": 1.0}
    with pytest.raises(SystemExit):
        parse_settings(["--set", "teacher_habits=[1, 2]"])  # a mapping, not a list
    passed = parse_settings(["--set", "rl.kl_coef=0.01", "--set", "rl.lr_schedule=cosine"])
    assert passed.extra == {"kl_coef": 0.01, "lr_schedule": "cosine"}  # RL config fields, checked by train_rl


def test_held_out_tasks_are_interleaved_by_family():
    settings = DemoSettings()
    _, test = build_tasks(settings)
    families = [t.data["family"] for t in test]
    assert len(test) == 4 * settings.test_tasks_per_family and all(t.split == "test" for t in test)
    assert families[:8] == list(settings.families) * 2  # the first k (periodic evaluation) are balanced


def test_demonstrations_are_weighted_by_the_decisions_a_task_needs():
    settings = replace(DemoSettings(), demos=400)
    tasks, _ = build_tasks(settings)
    count = {f: 0 for f in settings.families}
    for task in demonstration_tasks(settings, tasks):
        assert task.split == "train"  # never a held-out task
        count[task.data["family"]] += 1
    # weights 1 : 2 : 2 : 3 (no tool, one tool, one tool, two tools) over equally many tasks per family
    assert count["lookup_calc"] > 1.2 * count["calc"] and count["calc"] > 1.4 * count["direct"], count
    uniform = demonstration_tasks(replace(settings, demo_weighting="uniform", demos=100), tasks)
    assert len({t.id for t in uniform}) == 100  # uniform: distinct tasks, as before
    with pytest.raises(ValueError, match="demo_weighting"):
        demonstration_tasks(replace(settings, demo_weighting="by_mood"), tasks)


def test_steps_are_compared_on_the_tasks_both_policies_solve():
    from types import SimpleNamespace

    from agentic_rl.demo import paired_steps
    from agentic_rl.rollout.trajectory import Trajectory, Turn

    def result(*episodes):  # (task id, turns, success)
        return SimpleNamespace(trajectories=[Trajectory(t, turns=[Turn("o", "a")] * n, success=ok)
                                             for t, n, ok in episodes])

    sft = result(("direct", 2, True), ("lookup", 2, False), ("calc", 2, True))
    rl = result(("direct", 1, True), ("lookup", 2, True), ("calc", 2, True))
    # RL's own successes average 5/3 steps vs SFT's 2, but on the same two tasks only the wasted call differs
    assert paired_steps(sft, rl) == {"tasks": 2, "sft": 2.0, "rl": 1.5}
    assert paired_steps(sft, result(("lookup", 3, True))) == {"tasks": 0, "sft": None, "rl": None}
