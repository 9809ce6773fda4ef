"""doctor: each diagnosis fires on a run with that problem, none fires on a healthy run."""

from __future__ import annotations

import json

import pytest
from synthetic_runs import episode, make_run
from typer.testing import CliRunner

from agentic_rl.cli import app
from agentic_rl.monitor.doctor import diagnose

HACK_ACTIONS = ["<action>echo 'import sys; sys.exit(0)' >> solution.py</action>", "<answer>done</answer>"]


def test_healthy_run_fires_nothing(tmp_path):
    report = diagnose(make_run(tmp_path / "healthy"))
    assert report.names() == [], report.to_text()
    assert report.skipped == {}
    assert report.exit_code == 0


PATHOLOGIES = {
    "reward_flat": dict(reward=lambda i, rng: 0.2 + rng.uniform(-0.001, 0.001), heldout=lambda i: 0.2),
    "reward_oscillating": dict(reward=lambda i, rng: 0.9 if i % 2 else -0.3, heldout=lambda i: 0.3),
    "reward_hacking": dict(trajectories=lambda i: [
        episode(f"h{i}-{j}", success=False, actions=HACK_ACTIONS, reward=0.9) for j in range(3)]
        + [episode(f"ok{i}", success=True)]),
    "late_degradation": dict(heldout=lambda i: [0.3, 0.6, 0.7, 0.5, 0.4][i // 4]),
    "env_failures": dict(env_error_rate=0.2),
    "entropy_collapse": dict(entropy=lambda i: 1.0 if i < 5 else 0.005),
    "kl_blowup": dict(kl=lambda i: 0.01 if i < 12 else 4.0),
    "numerical": dict(extra=lambda i: {"loss/total": float("nan")} if i == 9 else {}),
    # success sinks while most groups the update learns from have none
    "failed_groups": dict(reward=lambda i, rng: 0.5 - 0.01 * i, heldout=lambda i: 0.3,
                          extra=lambda i: {"update/failed_group_share": 0.8}),
}


@pytest.mark.parametrize("name", sorted(PATHOLOGIES))
def test_each_diagnosis_fires_alone_with_evidence_and_remedies(tmp_path, name):
    report = diagnose(make_run(tmp_path / name, **PATHOLOGIES[name]))
    assert report.names() == [name], report.to_text()
    diagnosis = report.diagnoses[0]
    assert diagnosis.evidence and diagnosis.remedies
    assert report.exit_code == 1


def test_hacking_evidence_names_the_trick_and_top_episodes(tmp_path):
    report = diagnose(make_run(tmp_path / "hack", **PATHOLOGIES["reward_hacking"]))
    text = report.to_text()
    assert "exit_before_tests" in text
    assert "top-reward failed episodes: iter 4 h4-0 reward 0.88" in text


def test_degradation_points_at_the_best_checkpoint(tmp_path):
    run = make_run(tmp_path / "deg", **PATHOLOGIES["late_degradation"])
    (run / "checkpoints" / "best").mkdir(parents=True)
    text = diagnose(run).to_text()
    assert "peaked at 0.70 (iteration 11)" in text
    assert "checkpoints/best exists" in text


def test_degradation_is_found_from_eval_jsonl_alone(tmp_path):
    run = make_run(tmp_path / "deg", heldout_metric=False, **PATHOLOGIES["late_degradation"])
    assert diagnose(run).names() == ["late_degradation"]


def test_half_written_run_is_diagnosed_and_says_what_is_missing(tmp_path):
    run = make_run(tmp_path / "killed", evals=False, kl=lambda i: 0.01 if i < 12 else 4.0)
    (run / "config.yaml").unlink()
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write('{"iteration": 20, "reward/me')  # the writer was killed mid-line
    report = diagnose(run)
    assert report.names() == ["kl_blowup"]
    assert any("torn last line" in n for n in report.notes)
    assert "missing: config.yaml" in report.notes and "missing: eval.jsonl" in report.notes
    assert "late_degradation" in report.skipped  # no held-out evaluations to judge it on


def test_cli_exit_codes(tmp_path):
    runner = CliRunner()
    healthy = runner.invoke(app, ["doctor", str(make_run(tmp_path / "ok"))])
    assert healthy.exit_code == 0, healthy.output
    assert "healthy" in healthy.output
    sick = runner.invoke(app, ["doctor", "--json", str(make_run(tmp_path / "sick", env_error_rate=0.3))])
    assert sick.exit_code == 1
    assert [d["name"] for d in json.loads(sick.output)["diagnoses"]] == ["env_failures"]
    missing = runner.invoke(app, ["doctor", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    assert "no such directory" in missing.output
