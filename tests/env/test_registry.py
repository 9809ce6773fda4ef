"""Registry, make() and the env CLI commands: listing, bad ids, bad kwargs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from agentic_rl.cli import app
from agentic_rl.env import PassiveChecker, UnknownEnvError, make, register, registered, spec, unregister
from agentic_rl.env.toys import BusyEnv, ReverseEnv

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def ids_for_these_tests():
    """Ids registered for these tests only (the contract tests run over whatever is registered)."""
    ids = [
        register("reverse-v0", ReverseEnv).id,
        register("reverse-v1", ReverseEnv, "reverse, upper-case words", perturbation="upper").id,
        register("busy-v0", "agentic_rl.env.toys:BusyEnv", work=10).id,
        register("broken-entry-v0", "agentic_rl.env.toys:NoSuchEnv", "points nowhere").id,
        register("broken-reward-v0", "test_checker:BrokenEnv", flaw="nan_reward").id,
    ]
    yield ids
    for env_id in ids:
        unregister(env_id)
    assert not set(ids) & set(registered())


def test_make_builds_a_checked_env_with_defaults_and_overrides():
    env = make("reverse-v1")
    assert isinstance(env, PassiveChecker) and isinstance(env.unwrapped, ReverseEnv)
    assert env.unwrapped.spec_id == "reverse-v1"
    assert env.reset(seed=0)[0].split("'")[1].isupper()  # the registered default applies
    assert make("reverse-v1", perturbation=None).reset(seed=0)[0].split("'")[1].islower()  # caller wins
    assert isinstance(make("busy-v0", passive_check=False), BusyEnv)  # lazy "module:Name" entry point
    assert make("busy-v0").unwrapped.work == 10


def test_unknown_id_lists_close_matches():
    with pytest.raises(UnknownEnvError) as caught:
        make("reverse")
    message = str(caught.value)
    assert message.startswith("unknown env id 'reverse'. Did you mean: ")
    suggested, registered_ids = message.split("Did you mean: ")[1].split("? Registered: ")
    assert {"reverse-v0", "reverse-v1"} <= set(suggested.split(", "))
    assert "tool-use-v0" in registered_ids.split(", ")
    assert isinstance(caught.value, KeyError)
    with pytest.raises(TypeError, match="env id must be a str"):
        make(3)


def test_unknown_kwarg_names_it_and_the_accepted_ones():
    with pytest.raises(TypeError) as caught:
        make("reverse-v0", hint_cots=0.1)
    message = str(caught.value)
    assert "reverse-v0: unknown argument(s) ['hint_cots']" in message
    for accepted in ("hint_cost", "invalid_action_penalty", "perturbation", "tasks", "max_observation_chars"):
        assert accepted in message


def test_bad_registrations_and_entry_points_are_clear():
    with pytest.raises(ValueError, match="must look like 'name-v0'"):
        register("NoVersion", ReverseEnv)
    with pytest.raises(ValueError, match="already registered"):
        register("reverse-v0", ReverseEnv)
    with pytest.raises(KeyError, match="unknown env id 'never-v0'"):
        unregister("never-v0")
    with pytest.raises(ImportError, match="broken-entry-v0: cannot load entry point"):
        make("broken-entry-v0")
    with pytest.raises(ValueError, match="unknown perturbation 'sideways'"):
        make("reverse-v0", perturbation="sideways")


def test_registered_lists_builtins_and_summaries():
    specs = registered()
    assert {"tool-use-v0", "workflow-v0", "web-v0", "world-v0", "code-repair-v0", "shell-v0"} <= set(specs)
    assert spec("reverse-v1").summary() == "reverse, upper-case words"
    assert spec("reverse-v0").summary() == ReverseEnv.description  # falls back to the class's line


def test_cli_envs_prints_every_id_with_its_description():
    result = runner.invoke(app, ["envs"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    for env_id, env_spec in registered().items():
        line = next(line for line in lines if line.startswith(env_id + " "))
        assert env_spec.summary() in line


def test_cli_check_env_exit_codes():
    ok = runner.invoke(app, ["check-env", "reverse-v0", "-n", "20", "--skip-gymnasium"])
    assert ok.exit_code == 0, ok.output
    assert "check-env reverse-v0: OK" in ok.output and "PASS garbage_actions" in ok.output
    unknown = runner.invoke(app, ["check-env", "revers-v0"])
    assert unknown.exit_code == 2 and "Did you mean: reverse-v0" in unknown.output
    bad_kwarg = runner.invoke(app, ["check-env", "reverse-v0", "-k", "colour=red"])
    assert bad_kwarg.exit_code == 2 and "unknown argument(s) ['colour']" in bad_kwarg.output


def test_cli_check_env_fails_with_exit_code_1_on_a_broken_env():
    result = runner.invoke(app, ["check-env", "broken-reward-v0", "-n", "20", "--skip-gymnasium"])
    assert result.exit_code == 1
    assert "FAIL rewards" in result.output and "reward must be finite, got nan" in result.output
