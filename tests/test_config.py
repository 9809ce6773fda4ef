"""Config: every shipped YAML validates; bad fields are named; overrides; the risk table warns."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from agentic_rl.config import SECTIONS, Config, ConfigError, ConfigRiskWarning, load_config, save_config

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))


def test_configs_exist():
    names = {p.name for p in CONFIGS}
    assert {"tool_use_grpo.yaml", "tool_use_ppo.yaml", "demo.yaml", "demo_quick.yaml"} <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads_validates_and_round_trips(path, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigRiskWarning)  # shipped configs stay inside the seed's ranges
        config = load_config(path)
    assert config.algo.advantage in {"grpo", "rloo", "reinforce_pp", "gae"}
    save_config(config, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == config


def test_extends_and_overrides():
    config = load_config(Path("configs/tool_use_ppo.yaml"), ["train.lr=3e-5", "algo.lam=0.9", "iterations=7"])
    assert config.algo.advantage == "gae" and config.env.env_id == "tool-use-v0"  # inherited
    assert config.train.lr == 3e-5 and config.algo.lam == 0.9 and config.train.iterations == 7


def test_unknown_field_is_rejected_by_name(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {lr: 1.0e-5, learning_rate: 0.1}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown config field 'train.learning_rate'.*valid: .*lr"):
        load_config(bad)
    with pytest.raises(ConfigError, match="unknown config field 'trian'"):
        load_config(None, ["trian.lr=1"])


def test_bad_value_names_the_field_and_value():
    with pytest.raises(ConfigError, match=r"'rollout.group_size'.*greater than or equal to 1.*got 0"):
        load_config(None, ["rollout.group_size=0"])
    with pytest.raises(ConfigError, match=r"'algo.credit'"):
        load_config(None, ["algo.credit=episode"])
    with pytest.raises(ConfigError, match="must look like section.field=value"):
        load_config(None, ["train.lr"])


def test_out_of_range_values_warn_with_the_risk():
    with pytest.warns(ConfigRiskWarning, match=r"train.lr=0.01 .*unstable"):
        Config.from_flat(lr=0.01)
    with pytest.warns(ConfigRiskWarning, match=r"algo.gamma=0.5 .*ignores later turns"):
        Config.from_flat(advantage="gae", gamma=0.5)
    with pytest.warns(ConfigRiskWarning, match=r"env.max_turns=200 .*slow"):
        Config.from_flat(max_turns=200)
    with pytest.warns(ConfigRiskWarning, match="does not decay"):
        Config.from_flat(epsilon=0.2, epsilon_final=0.2)


def test_flat_names_are_unique_across_sections():
    seen: dict[str, str] = {}
    for section, model in SECTIONS.items():
        for name in model.model_fields:
            assert name not in seen, f"{name} is in both {seen.get(name)} and {section}"
            seen[name] = section
    assert Config.from_flat(advantage="rloo", lr=2e-5).flat()["advantage"] == "rloo"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (b"train:\n  lr: 1.0e-5  # caf\xe9\n", r"bad\.yaml:2: not valid UTF-8"),
        (b"train:\n  lr: 1.0e-5\ntrain:\n  iterations: 3\n", r"bad\.yaml: invalid YAML: key 'train' appears twice.*line 3"),
        (b"extends: bad.yaml\n", r"bad\.yaml: 'extends' makes a cycle"),
        (b"extends: missing.yaml\n", r"bad\.yaml: 'extends' names a config file that does not exist: .*missing\.yaml"),
        (b"train:\n  iterations: true\n", r"'train\.iterations': expected a number, got a boolean"),
    ],
    ids=["latin-1 byte", "repeated section", "extends itself", "extends a missing file", "bool for a count"],
)
def test_bad_config_file_is_named_with_line_or_field(tmp_path, text, needle):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(text)
    with pytest.raises(ConfigError, match=needle):
        load_config(bad)


def test_bad_override_names_the_override():
    with pytest.raises(ConfigError, match=r"override 'env\.env_kwargs=\{levels: \[0': the value is not valid YAML"):
        load_config(None, ["env.env_kwargs={levels: [0"])
    with pytest.raises(ConfigError, match=r"'train' is a section, not a field"):
        load_config(None, ["train=3"])
    with pytest.raises(ConfigError, match=r"'train\.lrr' \(did you mean 'lr'\?\)"):
        load_config(None, ["train.lrr=1e-5"])
