"""Wrappers: each changes what its name says, keeps the reward terms summing, forwards the extras."""

from __future__ import annotations

import json
import math

import pytest

from agentic_rl.agent.actions import answer, tool_call
from agentic_rl.env.toys import FaultyEnv, ReverseEnv
from agentic_rl.env.wrappers import IllegalActionPenalty, RecordEpisode, RewardShaping, StepTimeout, TimeLimit

HINT = tool_call("hint")


def _terms_sum(info: dict, reward: float) -> bool:
    return math.isclose(sum(info["reward_terms"].values()), reward, abs_tol=1e-9)


def test_wrappers_forward_state_prompt_expert_and_attributes():
    env = TimeLimit(IllegalActionPenalty(ReverseEnv(), penalty=-0.2), max_steps=3)
    env.reset(seed=1)
    env.step(HINT)
    assert env.state()["hints"] == 1 and env.state()["steps"] == 1
    assert "hint" in env.system_prompt()
    assert env.expert_action(1.0) == answer(env.task.data["word"][::-1])  # .task falls through two wrappers
    assert env.steps == 1 and env.reward_range == (-1.0, 1.0)
    with pytest.raises(AttributeError, match="no_such_attribute"):
        env.no_such_attribute  # noqa: B018


def test_time_limit_truncates_after_max_steps():
    env = TimeLimit(ReverseEnv(), max_steps=2)
    env.reset(seed=0)
    assert env.step(HINT)[3] is False
    _, _, terminated, truncated, info = env.step(HINT)
    assert truncated and not terminated and info["truncated_by"] == "time_limit"
    env.reset(seed=0)  # the count starts again
    assert env.step(HINT)[3] is False
    with pytest.raises(ValueError, match="max_steps"):
        TimeLimit(ReverseEnv(), max_steps=0)


def test_time_limit_keeps_a_terminated_episode_terminated():
    env = TimeLimit(ReverseEnv(), max_steps=1)
    observation, _ = env.reset(seed=0)
    _, reward, terminated, truncated, _ = env.step(answer(observation.split("'")[1][::-1]))
    assert terminated and not truncated and reward == 1.0


def test_illegal_action_penalty_replaces_the_penalty_and_ends_after_the_limit():
    env = IllegalActionPenalty(ReverseEnv(invalid_action_penalty=-0.1), penalty=-0.5, max_invalid=3)
    env.reset(seed=0)
    for count, action in enumerate(["gibberish", tool_call("nope"), "<answer></answer>"], start=1):
        _, reward, terminated, truncated, info = env.step(action)
        assert reward == -0.5 and info["reward_terms"]["invalid_action"] == -0.5 and _terms_sum(info, reward)
        assert info["invalid_actions"] == count
        assert truncated == (count == 3) and not terminated
    assert info["truncated_by"] == "invalid_actions"
    env.reset(seed=0)
    _, reward, _, truncated, info = env.step(HINT)  # a legal action is not counted or penalised
    assert reward == -0.05 and info["invalid_actions"] == 0 and not truncated


def test_illegal_action_penalty_none_keeps_the_envs_own_penalty():
    env = IllegalActionPenalty(ReverseEnv(invalid_action_penalty=-0.3), penalty=None, max_invalid=None)
    env.reset(seed=0)
    for _ in range(10):
        _, reward, _, truncated, _ = env.step("no action here")
        assert reward == -0.3 and not truncated


def test_step_timeout_turns_a_hang_into_a_truncated_failure():
    env = StepTimeout(FaultyEnv(fault="hang", after=1, hang_s=30), seconds=0.3, penalty=-1.0)
    env.reset(seed=0)
    assert env.step(HINT)[4].get("error") is None
    observation, reward, terminated, truncated, info = env.step(HINT)
    assert "timed out" in observation and reward == -1.0 and truncated and not terminated
    assert info["error"] == "timeout" and info["reward_terms"] == {"timeout": -1.0}
    with pytest.raises(RuntimeError, match="still running"):
        env.reset(seed=0)


def test_step_timeout_turns_an_exception_into_an_env_error():
    env = StepTimeout(FaultyEnv(fault="raise"), seconds=5, penalty=-0.5)
    env.reset(seed=0)
    observation, reward, terminated, _, info = env.step(HINT)
    assert observation.startswith("Error:") and reward == -0.5 and terminated
    assert info["error"] == "env_error" and "RuntimeError: FaultyEnv failed" in info["exception"]
    with pytest.raises(TypeError, match="must be a str"):
        env.step(b"bytes")


def test_reward_shaping_adds_named_terms_that_sum_to_the_reward():
    seen = []

    def bonus(observation, reward, terminated, truncated, info):
        seen.append(reward)
        return 0.25 if terminated else 0.0

    env = RewardShaping(ReverseEnv(), {"finish_bonus": bonus, "length": lambda o, *_: -len(o) / 1000})
    env.reset(seed=0)
    observation, reward, _, _, info = env.step(HINT)
    assert seen == [-0.05]  # terms see the env's own reward
    assert info["reward_terms"]["shaping/finish_bonus"] == 0.0
    assert info["reward_terms"]["shaping/length"] == pytest.approx(-len(observation) / 1000)
    assert _terms_sum(info, reward)
    bad = RewardShaping(ReverseEnv(), {"broken": lambda *_: float("nan")})
    bad.reset(seed=0)
    with pytest.raises(ValueError, match="'broken' returned nan"):
        bad.step(HINT)


def test_record_episode_writes_every_step_as_jsonl(tmp_path):
    path = tmp_path / "episodes" / "log.jsonl"
    env = RecordEpisode(ReverseEnv(), path)
    for seed in (0, 1):
        observation, _ = env.reset(seed=seed)
        env.step("\ud800 junk")  # a lone surrogate must not break the log
        env.step(answer(observation.split("'")[1][::-1]))
    env.close()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [(r["episode"], r["step"], r["kind"]) for r in rows] == [
        (0, 0, "reset"), (0, 1, "step"), (0, 2, "step"), (1, 0, "reset"), (1, 1, "step"), (1, 2, "step")]
    assert rows[1]["action"] == "\ud800 junk" and rows[1]["info"]["error"] == "parse_error"
    assert rows[2]["reward"] == 1.0 and rows[2]["terminated"] is True and rows[3]["seed"] == 1
