import importlib.util
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentic_rl.cli import app
from agentic_rl.env.checker import check_env
from agentic_rl.env.registry import make
from agentic_rl.envs.experts import play_expert

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "custom_env.py"
DOC = ROOT / "docs" / "write_your_own_env.md"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("custom_env", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_env"] = module
    spec.loader.exec_module(module)
    return module


def test_example_is_short_and_is_the_code_shown_in_the_docs():
    source = EXAMPLE.read_text()
    assert len(source.splitlines()) <= 100
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert source in blocks, "docs/write_your_own_env.md must show examples/custom_env.py verbatim"


def test_example_registers_and_passes_the_checkers(example):
    env = make("guess-number-v0", split="test")
    assert isinstance(env.unwrapped, example.GuessNumberEnv) and env.unwrapped.tasks.levels() == [0, 1, 2]
    report = check_env("guess-number-v0", n_random_actions=150)
    assert report.ok, report.format()


def test_example_expert_solves_and_weaker_expert_does_not(example):
    for perturbation in (None, "paraphrase"):
        env = make("guess-number-v0", split="test", perturbation=perturbation)
        tasks = env.unwrapped.tasks
        assert all(play_expert(env, t, skill=1.0, seed=i).success for i, t in enumerate(tasks))
    half = [play_expert(env, t, skill=0.5, seed=i).success for i, t in enumerate(tasks.level(2))]
    assert sum(half) < len(half)
    with pytest.raises(ValueError, match="paraphrase"):
        make("guess-number-v0", perturbation="shuffle")


def test_example_can_be_played_from_the_terminal(example):
    env = make("guess-number-v0", split="test")
    env.reset(seed=2)
    guesses = []
    while True:
        action = env.unwrapped.expert_action(1.0)
        guesses.append(re.sub(r"</?answer>", "", action))
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    result = CliRunner().invoke(app, ["play", "guess-number-v0", "--module", str(EXAMPLE), "--split", "test",
                                      "--seed", "2"], input="\n".join(guesses) + "\n")
    assert result.exit_code == 0, result.output
    assert "Correct!" in result.output and "Episode over: success" in result.output
