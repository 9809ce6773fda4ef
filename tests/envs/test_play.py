import re

from typer.testing import CliRunner

from agentic_rl.cli import app
from agentic_rl.envs.web import WebShopEnv
from agentic_rl.envs.world import GridWorldEnv

runner = CliRunner()


def expert_lines(env, task_id, seed):
    """The skill-1.0 expert's actions for one episode, as a person would type them (no tags)."""
    env.reset(seed=seed, options={"task": task_id})
    lines = []
    while True:
        action = env.expert_action(1.0)
        lines.append(re.sub(r"</?action>", "", action))
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return lines


def test_play_world_to_the_goal_from_stdin():
    lines = expert_lines(GridWorldEnv(split=None), "world-L1-test-002", seed=4)
    result = runner.invoke(app, ["play", "world-v0", "--task", "world-L1-test-002", "--seed", "4"],
                           input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "task world-L1-test-002" in out and "Legend:" in out
    assert "subgoal/key +0.100" in out and "subgoal/door +0.100" in out and "outcome +1.000" in out
    expected_return = 1.0 + 0.1 + 0.1 - 0.01 * len(lines)  # outcome, two sub-goals, step costs
    assert f"Episode over: success · return {expected_return:+.3f} over {len(lines)} steps." in out


def test_play_reports_errors_and_stops_at_end_of_input():
    result = runner.invoke(app, ["play", "world-v0", "--split", "test", "--hide-actions"],
                           input="dance wildly\n:actions\n")
    assert result.exit_code == 0, result.output
    assert "> <action>dance wildly</action>" in result.output and "error: invalid_action" in result.output
    assert "actions: <action>go " in result.output  # ':actions' shows them even when hidden
    assert "Stopped before the end · return -0.100 over 1 steps." in result.output


def test_play_web_fact_task_with_hint_and_raw_answer():
    env = WebShopEnv(split="test")
    task = next(t for t in env.tasks if t.data["kind"] == "fact")
    lines = expert_lines(env, task.id, seed=0)
    assert lines[-1].startswith("<answer>")
    result = runner.invoke(app, ["play", "web-v0", "--split", "test", "--task", task.id], input=":hint\n"
                           + "\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    assert "hint: <action>search " in result.output and "Your answer is correct." in result.output
    assert "Episode over: success" in result.output


def test_play_rejects_unknown_perturbation_and_env():
    result = runner.invoke(app, ["play", "world-v0", "--perturbation", "earthquake"], input="")
    assert result.exit_code == 2 and "valid: noisy_observation, renamed_labels" in result.output
    result = runner.invoke(app, ["play", "wrld-v0"], input="")
    assert result.exit_code == 2 and "world-v0" in result.output
