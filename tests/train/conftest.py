"""Fixtures for trainer tests: a fresh tiny policy, the letter-e env and its rollout function."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from toy import letter_tasks, make_rollout_fn  # noqa: E402

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    # the trainer tests use a deliberately high learning rate and one-turn episodes on a tiny random model
    for item in items:
        if Path(str(item.fspath)).is_relative_to(HERE):
            item.add_marker(pytest.mark.filterwarnings("ignore::agentic_rl.config.ConfigRiskWarning"))



@pytest.fixture
def tiny_policy(tiny_model_path):
    from agentic_rl.models.policy import load_policy

    return load_policy(str(tiny_model_path))


@pytest.fixture
def letter_run(tiny_policy):
    """(policy, rollout_fn, tasks) for the letter-e env."""
    return tiny_policy, make_rollout_fn(tiny_policy), letter_tasks()
