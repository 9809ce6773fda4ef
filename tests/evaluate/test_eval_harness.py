"""evaluate(): expert reference without a model, robustness, paired comparison, CLI, and determinism of a
checkpoint evaluated twice with the same tasks and seeds."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentic_rl.cli import app
from agentic_rl.evaluate import compare, evaluate
from agentic_rl.evaluate.commands import parse_seeds

ENV = "tool-use-v0"


def wrong_answer_agent(observation: str, info: dict) -> str:
    return "<answer>no idea</answer>"


def test_expert_reference_runs_without_a_model():
    result = evaluate("expert", ENV, seeds=[0, 1], limit=4, perturbations=["paraphrase"])
    assert result.clean.episodes == 8  # 4 tasks x 2 seeds
    assert result.clean.success_rate == 1.0
    assert result.clean.success_ci_low < 1.0 == result.clean.success_ci_high
    assert result.perturbed["paraphrase"].episodes == 8
    assert result.robustness["paraphrase"] == pytest.approx(result.perturbed["paraphrase"].success_rate)
    assert {t.task_id for t in result.trajectories} == {t.task_id for t in result.perturbed_trajectories["paraphrase"]}
    assert all(t.task_id.startswith("tool") or t.task_id for t in result.trajectories)
    rows = result.rows(iteration=3)
    assert [r["perturbation"] for r in rows] == [None, "paraphrase"]
    assert rows[0]["split"] == "test" and rows[0]["iteration"] == 3 and rows[0]["pass@1"] == 1.0


def test_failing_agent_is_analysed_and_compared_with_a_paired_test():
    expert = evaluate("expert", ENV, seeds=[0, 1], limit=5)
    weak = evaluate(wrong_answer_agent, ENV, seeds=[0, 1], limit=5)
    assert weak.clean.success_rate == 0.0
    assert weak.failures.counts == {"wrong_answer": 10}
    comparison = compare([weak, expert])
    after = comparison.rows[1]
    assert after["test"] == "mcnemar_exact" and after["paired_episodes"] == 10
    assert after["wins"] == 10 and after["losses"] == 0
    assert after["p_value"] == pytest.approx(2 / 2**10) and after["significant"] is True
    assert after["success_diff"] == 1.0
    same = compare([expert, evaluate("expert", ENV, seeds=[0, 1], limit=5)]).rows[1]
    assert same["p_value"] == 1.0 and same["significant"] is False


def test_pass_at_k_needs_sampling_and_is_reported():
    with pytest.raises(ValueError, match="greedy=False"):
        evaluate("expert", ENV, samples_k=2, limit=1)
    result = evaluate("expert:0.5", ENV, samples_k=4, greedy=False, limit=3)
    assert result.clean.episodes == 12
    assert set(result.clean.pass_at_k) == {"pass@1", "pass@2", "pass@4"}
    assert result.clean.pass_at_k["pass@4"] >= result.clean.pass_at_k["pass@1"]


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="unknown perturbation.*'sideways'"):
        evaluate("expert", ENV, perturbations=["sideways"], limit=1)
    with pytest.raises(ValueError, match="skill must be in"):
        evaluate("expert:3", ENV, limit=1)
    with pytest.raises(ValueError, match="no tasks"):
        evaluate("expert", ENV, limit=0)


def test_parse_seeds():
    assert parse_seeds("0-2,7") == [0, 1, 2, 7]
    with pytest.raises(Exception, match="range like 0-4"):
        parse_seeds("a")


def test_cli_eval_writes_results_and_compare(tmp_path):
    runner = CliRunner()
    single = runner.invoke(app, ["eval", "expert", "--env", ENV, "--limit", "3", "--seeds", "0-1",
                                 "--out", str(tmp_path / "one")])
    assert single.exit_code == 0, single.output
    assert "95% CI (Wilson)" in single.output
    rows = [json.loads(line) for line in (tmp_path / "one" / "eval.jsonl").read_text().splitlines()]
    assert rows[0]["episodes"] == 6 and rows[0]["success_rate"] == 1.0
    both = runner.invoke(app, ["eval", "--compare", "expert", "expert:0.2", "--env", ENV, "--limit", "3",
                               "--out", str(tmp_path / "cmp")])
    assert both.exit_code == 0, both.output
    assert "McNemar" in both.output and "(baseline)" in both.output
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [r["policy"] for r in saved["rows"]] == ["expert", "expert:0.2"]
    bad = runner.invoke(app, ["eval", "expert", "expert:0.2", "--env", ENV])
    assert bad.exit_code != 0 and "--compare" in bad.output


def test_same_checkpoint_tasks_and_seed_give_the_same_numbers(tmp_path, tiny_model_path):
    from agentic_rl.models import load_policy

    checkpoint = load_policy(tiny_model_path).save(tmp_path / "ckpt")
    kwargs = dict(seeds=[3], limit=1, max_turns=1, max_new_tokens=6, greedy=False, samples_k=2)
    first = evaluate(str(checkpoint), ENV, **kwargs)
    again = evaluate(str(checkpoint), ENV, **kwargs)
    assert json.dumps(first.rows()) == json.dumps(again.rows())  # (NaN-safe equality)
    assert [t.turns[0].action for t in first.trajectories] == [t.turns[0].action for t in again.trajectories]
    other_seed = evaluate(str(checkpoint), ENV, **{**kwargs, "seeds": [4]})
    # sampling noise really depends on the seed, so the equality above is not vacuous
    assert [t.turns[0].action for t in other_seed.trajectories] != [t.turns[0].action for t in first.trajectories]


def test_cli_eval_names_a_split_the_task_file_lacks(tmp_path):
    from agentic_rl.envs.tool_use_tasks import generate_tasks

    path = tmp_path / "mine.jsonl"
    generate_tasks(seed=0, n_per_family=2, families=("calc",)).split("train").save(path)
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "expert", "--env", ENV, "--tasks", str(path), "--split", "tset"])
    assert result.exit_code != 0
    assert "'tset'" in result.output and "splits present: train" in result.output
    whole = runner.invoke(app, ["eval", "expert", "--env", ENV, "--tasks", str(path), "--limit", "2"])
    assert whole.exit_code == 0, whole.output  # no --split: the file is evaluated whole


def test_cli_eval_checks_a_task_files_data_with_the_envs_own_rules(tmp_path):
    from agentic_rl.envs.tool_use_tasks import generate_tasks

    rows = [t.to_dict() for t in generate_tasks(seed=0, n_per_family=2, families=("calc",))]
    rows[0]["data"]["needed"] = "calculator"
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = CliRunner().invoke(app, ["eval", "expert", "--env", ENV, "--tasks", str(path)])
    assert result.exit_code != 0
    assert "mine.jsonl:1" in result.output and "needed" in result.output
