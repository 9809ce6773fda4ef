"""The Env base class and TextSpace: the parts every env inherits."""

from __future__ import annotations

import pytest

from agentic_rl.agent.actions import answer, tool_call
from agentic_rl.env.core import TextSpace
from agentic_rl.env.toys import BusyEnv, ReverseEnv, reverse_tasks


def test_text_space_accepts_any_unicode_up_to_its_limit():
    space = TextSpace(10, seed=0)
    assert space.contains("中文😀\x00\n") and space.contains("") and not space.contains("x" * 11)
    assert not space.contains(b"bytes") and not space.contains(None)
    samples = [space.sample() for _ in range(50)]
    assert all(space.contains(s) for s in samples) and len(set(samples)) > 10
    assert TextSpace(10) == space and TextSpace(11) != space
    with pytest.raises(ValueError, match="max_length must be > 0"):
        TextSpace(0)


def test_non_string_action_raises_type_error_naming_the_type():
    env = ReverseEnv()
    env.reset(seed=0)
    for bad, name in ((42, "int"), (None, "NoneType"), (b"x", "bytes"), (["x"], "list")):
        with pytest.raises(TypeError, match=f"action must be a str .*got {name}"):
            env.step(bad)


def test_garbage_is_an_error_observation_with_a_penalty_not_an_exception():
    env = ReverseEnv(invalid_action_penalty=-0.2)
    env.reset(seed=0)
    huge = '<tool>{"name": "hint", "arguments": {"n": ' + "9" * 5000 + "}}</tool>"
    for action in ("", "\x00" * 8, "<think>unclosed", huge, "<action>look</action>"):
        observation, reward, terminated, truncated, info = env.step(action)
        assert observation.startswith("Error:") and reward == -0.2 and not terminated and not truncated
        assert info["error"] == "parse_error" and info["reward_terms"] == {"invalid_action": -0.2}
        assert info["success"] is False and info["action_kind"] == "invalid"


def test_same_seed_same_task_and_options_pick_a_task():
    env = ReverseEnv()
    first = env.reset(seed=11)
    assert env.reset(seed=11) == first
    task = reverse_tasks()[2]
    assert env.reset(options={"task": task})[1]["task_id"] == task.id
    assert env.reset(options={"task": task.id})[1]["task_id"] == task.id
    with pytest.raises(KeyError, match="no task with id 'nope'"):
        env.reset(options={"task": "nope"})
    with pytest.raises(TypeError, match="must be a Task or a task id"):
        env.reset(options={"task": 3})


def test_observations_are_clipped_with_a_marker():
    env = ReverseEnv(max_observation_chars=40)
    observation, _ = env.reset(seed=0)
    assert len(observation) == 40 and observation.endswith("...[truncated]")
    assert env.observation_space.contains(observation)


def test_infos_are_fresh_objects_and_state_is_a_snapshot():
    env = ReverseEnv()
    env.reset(seed=0)
    first = env.step(tool_call("hint"))[4]
    second = env.step(tool_call("hint"))[4]
    first["reward_terms"]["step_cost"] = 99.0  # a caller editing one info must not change another
    assert second["reward_terms"] == {"step_cost": -0.05}
    assert env.state() == {"env": "ReverseEnv", "task_id": env.task.id, "steps": 2, "hints": 2}


def test_step_before_reset_is_a_clear_error_and_render_shows_the_last_observation():
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        ReverseEnv().step(answer("x"))
    env = ReverseEnv(render_mode="ansi")
    observation, _ = env.reset(seed=0)
    assert env.render() == observation
    with pytest.raises(ValueError, match="render_mode must be one of"):
        ReverseEnv(render_mode="human")


def test_env_without_tasks_runs_and_has_no_expert():
    env = BusyEnv(work=10, episode_steps=2)
    assert env.reset(seed=0)[1]["task_id"] is None
    assert env.step("<answer>a</answer>")[2] is False and env.step("<answer>b</answer>")[2] is True
    with pytest.raises(NotImplementedError, match="BusyEnv has no scripted expert"):
        env.expert_action()
