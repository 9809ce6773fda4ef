"""The contract every registered env must meet (parametrised over ``registered()``)."""

from __future__ import annotations

import json
import warnings

import pytest

from agentic_rl.env import EnvContractWarning, make, registered
from agentic_rl.env.check import check_env

ENV_IDS = sorted(registered())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env_passes_check_env(env_id):
    # Determinism, clean resets, adversarial + random actions, reward range, JSON state, Gymnasium's checker.
    report = check_env(env_id, n_random_actions=30, seed=1)
    assert report.ok, report.format()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env_made_by_make_follows_the_contract_end_to_end(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error", EnvContractWarning)  # the passive checker must stay silent
        env = make(env_id)
        observation, info = env.reset(seed=7)
        assert isinstance(observation, str) and observation and "task_id" in info
        assert isinstance(env.system_prompt(), str)
        with pytest.raises(TypeError, match="str"):
            env.step(None)
        reward_total = 0.0
        for _ in range(50):  # the env's own expert should be able to finish a task
            observation, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action(1.0))
            reward_total += reward
            assert isinstance(info["success"], bool)
            if terminated or truncated:
                break
        assert terminated or truncated, f"{env_id}: the expert did not finish an episode in 50 steps"
        assert info["success"] is True, f"{env_id}: the expert (skill 1.0) failed: {observation[:300]}"
        json.dumps(env.state())
        env.close()
