"""The checkers catch envs that break the contract, each with a message that says what is wrong."""

from __future__ import annotations

import random
import warnings

import pytest

from agentic_rl.agent.actions import answer
from agentic_rl.env.check import EnvCheckError, check_env
from agentic_rl.env.checker import EnvContractWarning, PassiveChecker
from agentic_rl.env.toys import FaultyEnv, ReverseEnv


class BrokenEnv(ReverseEnv):
    """A ReverseEnv with one deliberate contract violation, chosen by ``flaw``."""

    def __init__(self, flaw: str, **kwargs):
        super().__init__(**kwargs)
        self.flaw = flaw
        self.episodes = 0

    def _reset(self, task):
        observation, info = super()._reset(task)
        self.episodes += 1
        if self.flaw == "global_random":
            observation += f" (lucky number {random.random():.6f})"  # ignores the seed
        if self.flaw == "leaky_reset":
            observation += f" (episode {self.episodes})"  # state that survives reset
        return observation, info

    def _step(self, action):
        observation, reward, terminated, truncated, info = super()._step(action)
        if self.flaw == "crash_on_garbage" and action.kind == "answer":
            int(action.text)  # raises on any non-number: the bug the fuzzing should find
        if self.flaw == "reward_out_of_range" and action.kind == "answer":
            reward = info["reward_terms"]["outcome"] = 5.0
        if self.flaw == "nan_reward" and action.kind == "tool_call":
            reward = float("nan")
        if self.flaw == "terms_do_not_sum":
            info["reward_terms"] = {"outcome": reward + 0.5}
        if self.flaw == "success_not_bool":
            info["success"] = 1 if info.get("success") else 0
        return observation, reward, terminated, truncated, info

    def _state(self):
        state = super()._state()
        if self.flaw == "state_not_json":
            state["seen"] = {1, 2}
        return state

    def step(self, action):
        if self.flaw == "accepts_bytes" and isinstance(action, bytes):
            action = action.decode()
        return super().step(action)


@pytest.mark.parametrize(("flaw", "check", "message"), [
    ("global_random", "determinism", "same seed and actions on the same instance gave a different episode"),
    ("leaky_reset", "reset_clean", "state leaks across episodes"),
    ("crash_on_garbage", "garbage_actions", "raised ValueError: invalid literal for int()"),
    ("reward_out_of_range", "rewards", "reward 5.0 is outside reward_range (-1.0, 1.0)"),
    ("nan_reward", "rewards", "reward must be finite, got nan"),
    ("terms_do_not_sum", "info", "sums to"),
    ("success_not_bool", "info", "info['success'] must be a bool, got int"),
    ("state_not_json", "state_json", "state() is not JSON-serialisable"),
    ("accepts_bytes", "action_type", "step(b'<answer>x</answer>') must raise TypeError"),
])
def test_check_env_catches_a_broken_env_with_a_clear_message(flaw, check, message):
    report = check_env(BrokenEnv(flaw), n_random_actions=40, gymnasium_check=False)
    assert not report.ok
    result = report.result(check)
    assert not result.passed, report.format()
    assert message in result.message, result.message
    assert f"FAIL {check}" in report.format()
    with pytest.raises(EnvCheckError, match=check):
        report.raise_if_failed()


def test_check_env_passes_a_correct_env_and_exercises_it():
    report = check_env(ReverseEnv(), n_random_actions=200, seed=3)
    assert report.ok, report.format()
    assert report.actions >= 200 + 100  # the random actions plus the adversarial set
    assert {r.name for r in report.results} >= {"determinism", "reset_clean", "garbage_actions", "gymnasium"}


def test_check_env_reports_a_hanging_env_instead_of_hanging():
    # The env sleeps an hour once it hangs; the check returns after its 1 s limit with a failure.
    report = check_env(FaultyEnv(fault="hang", after=3, hang_s=3600), n_random_actions=10, check_timeout_s=1.0)
    failed = report.failures()
    assert len(failed) == 1 and "did not finish within 1 s" in failed[0].message


def test_gymnasium_checker_failure_is_reported():
    class SharesInfo(ReverseEnv):
        shared = {"note": []}

        def step(self, action):
            observation, reward, terminated, truncated, info = super().step(action)
            info["extra"] = self.shared  # the same mutable object every step
            return observation, reward, terminated, truncated, info

    report = check_env(SharesInfo(), n_random_actions=5)
    assert not report.result("gymnasium").passed
    assert "share an object" in report.result("gymnasium").message


def test_passive_checker_warns_once_per_problem_and_never_raises():
    env = PassiveChecker(BrokenEnv("reward_out_of_range"))
    observation, _ = env.reset(seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            env.reset(seed=0)
            result = env.step(answer("zzz"))
    assert result[1] == 5.0  # results pass through unchanged
    messages = [str(w.message) for w in caught if issubclass(w.category, EnvContractWarning)]
    assert messages == ["BrokenEnv: step() reward 5.0 is outside reward_range (-1.0, 1.0)"]
    with pytest.raises(TypeError, match="action must be a str"):
        env.step(7)


def test_passive_checker_is_silent_on_a_correct_env():
    env = PassiveChecker(ReverseEnv())
    with warnings.catch_warnings():
        warnings.simplefilter("error", EnvContractWarning)
        env.reset(seed=0)
        for action in ("junk", answer("x")):
            env.step(action)
