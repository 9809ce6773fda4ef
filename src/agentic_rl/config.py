"""Typed run configuration: pydantic sections, YAML files, dotted overrides, and the risk table.

A config file (see ``configs/*.yaml``) has one mapping per section; every field has a default::

    extends: demo.yaml          # optional: start from another file (path relative to this one)
    model:   {model_name: smollm2-135m, lora: false, trainable_layers: 4}
    env:     {env_id: tool-use-v0, max_turns: 4}
    rollout: {group_size: 8, tasks_per_iteration: 4, temperature: 1.0, temperature_final: 0.7}
    algo:    {advantage: grpo, loss: ppo_clip, clip_high: 0.28}
    train:   {iterations: 30, lr: 2.0e-5}
    ...

Overrides use dotted paths with YAML values: ``train.lr=1e-5``, ``env.env_kwargs={levels: [0, 1]}``.
Unknown sections/fields and ill-typed values raise :class:`ConfigError` naming the field. Values outside
the seed's recommended ranges (:data:`RISKS`) are accepted but warn (:class:`ConfigRiskWarning`) naming
the risk.

Field names are unique across sections, so Python callers can pass them flat:
``Config.from_flat(lr=1e-5, advantage="gae")`` (what :func:`agentic_rl.train.train_rl` does).
"""

from __future__ import annotations

import difflib
import warnings
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator


class ConfigError(ValueError):
    """A config file, override or field value is invalid; the message names the field."""


class ConfigRiskWarning(UserWarning):
    """A value is outside the seed's recommended range; the message says what can go wrong."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads true as 1: `iterations: true` would silently train for one iteration.
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            kinds = {annotation, *get_args(annotation)}
            if bool not in kinds and kinds & {int, float}:
                raise ValueError("expected a number, got a boolean")
        return value


class ModelConfig(_Section):
    model_name: str = Field("smollm2-135m", description="embedded model name, local HF directory or hub id")
    lora: bool = Field(False, description="train a LoRA adapter instead of the weights")
    lora_rank: int = Field(16, ge=1)
    lora_alpha: int = Field(32, ge=1)
    lora_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    trainable_layers: int | None = Field(
        None, ge=0, description="full fine-tuning of only the top-k transformer blocks (+ final norm); None = all")
    dtype: str = Field("auto", description="auto (fp32 on CPU, bf16 on GPU), float32, bfloat16")
    device: str = Field("auto", description="auto, cpu, cuda, cuda:1 ...")


class EnvConfig(_Section):
    env_id: str = Field("tool-use-v0", description="registered env id")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for make()")
    task_file: str | None = Field(None, description="JSONL task file; default: the env's own task set")
    train_split: str = "train"
    eval_split: str = "test"
    max_turns: int = Field(6, ge=1, description="max env steps per episode")


class RolloutConfig(_Section):
    group_size: int = Field(8, ge=1, description="episodes per task per iteration (GRPO group)")
    tasks_per_iteration: int = Field(4, ge=1)
    max_new_tokens: int = Field(64, ge=1, description="per turn")
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature at the start")
    temperature_final: float | None = Field(None, gt=0.0, description="decayed to this; None = constant")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    epsilon: float = Field(0.0, ge=0.0, le=1.0, description="ε-greedy over admissible actions at the start")
    epsilon_final: float = Field(0.0, ge=0.0, le=1.0)
    explore_kinds: float = Field(0.0, ge=0.0, le=1.0, description=(
        "per policy turn, the chance of forcing the opening tag of a uniformly drawn action kind the env "
        "accepts (<tool>, <answer>, ...); the policy writes the rest and is trained on the opener as on its "
        "own tokens: exploration of *which kind* of action, where actions cannot be enumerated"))
    explore_kinds_final: float = Field(0.0, ge=0.0, le=1.0, description="explore_kinds is decayed to this")
    guide_failed: float = Field(0.0, ge=0.0, le=1.0, description=(
        "chance that a group without any success is re-played after a prefix of the env expert's actions "
        "(forced, mask 0); see agentic_rl.train.guide"))
    guide_failed_final: float = Field(0.0, ge=0.0, le=1.0, description="guide_failed is decayed to this")
    explore_decay_iterations: int | None = Field(None, ge=1, description="decay length; None = the whole run")


class AlgoConfig(_Section):
    advantage: str = Field("grpo", description="grpo, rloo, reinforce_pp, gae (or a registered one)")
    loss: str = Field("ppo_clip", description="policy loss: ppo_clip, reinforce (or a registered one)")
    norm_std: bool = Field(True, description="grpo: divide by group std; reinforce_pp/gae: whiten")
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="discount across turns")
    lam: float = Field(0.95, ge=0.0, le=1.0, description="GAE λ")
    credit: Literal["turn", "token"] = Field("turn", description="gae steps: turns (broadcast) or tokens")
    clip_low: float = Field(0.2, ge=0.0, lt=1.0)
    clip_high: float = Field(0.2, ge=0.0)
    aggregation: Literal["token_mean", "seq_mean", "seq_sum"] = "token_mean"
    kl_coef: float = Field(0.0, ge=0.0, description="KL to the reference (initial) policy; 0 = off")
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    kl_in: Literal["loss", "reward"] = Field("loss", description="KL term in the loss or as a reward penalty")
    entropy_coef: float = Field(0.0, ge=0.0)
    efficiency_coef: float = Field(0.0, ge=0.0, lt=2.0, description=(
        "bonus that ranks a group's successes by env steps (fewest +coef/2, most -coef/2; failures 0): "
        "teaches dropping unneeded steps without paying for failing fast; see agentic_rl.algos.efficiency_bonus"))
    vf_coef: float = Field(0.5, ge=0.0, description="value-loss weight (gae)")
    value_clip: float | None = Field(0.2, gt=0.0)


class TrainConfig(_Section):
    iterations: int = Field(20, ge=1)
    lr: float = Field(1e-5, gt=0.0)
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0, description="optimizer steps of linear warm-up")
    min_lr_ratio: float = Field(0.1, ge=0.0, le=1.0)
    weight_decay: float = Field(0.0, ge=0.0)
    max_grad_norm: float = Field(1.0, gt=0.0, description="gradient clipping")
    update_epochs: int = Field(1, ge=1, description="passes over each iteration's batch")
    minibatches: int = Field(1, ge=1, description="optimizer steps per pass")
    token_budget: int = Field(4096, ge=16, description="max padded tokens per micro-batch (memory)")
    seed: int = 0
    filter_zero_variance: bool = Field(True, description="drop groups whose rewards are all equal")
    drop_failed_groups: bool = Field(False, description=(
        "drop groups without any success: their reward spread is only shaping and costs, which teaches "
        "failing cheaply (see agentic_rl.train.curriculum.drop_failed_groups)"))
    replay_capacity: int = Field(0, ge=0, description="past successful trajectories kept (0 = off)")
    replay_max_group_success: float = Field(1.0, ge=0.0, le=1.0, description=(
        "keep only successes from groups that succeeded at most this often: < 1 replays the rare, hard-won "
        "successes (a new skill) rather than what the policy already does reliably"))
    replay_samples: int = Field(4, ge=0, description="replayed per iteration (split over its optimizer steps)")
    replay_coef: float = Field(0.0, ge=0.0, description="weight of the NLL loss on replayed successes")
    sft_mix_coef: float = Field(0.0, ge=0.0, description="weight of the NLL loss on SFT demonstrations")
    sft_mix_samples: int = Field(4, ge=0)


class CurriculumConfig(_Section):
    use_curriculum: bool = False
    start_level: int = Field(0, ge=0)
    promote_threshold: float = Field(0.8, ge=0.0, le=1.0)
    demote_threshold: float | None = Field(0.2, ge=0.0, le=1.0, description="None = never demote")
    curriculum_window: int = Field(32, ge=1, description="recent episodes of the level that count")
    lower_level_mix: float = Field(0.2, ge=0.0, le=1.0, description="share of tasks from easier levels")


class EvalConfig(_Section):
    eval_every: int = Field(5, ge=0, description="iterations between held-out evaluations; 0 = only at the end")
    eval_tasks: int = Field(32, ge=1)
    eval_greedy: bool = True
    eval_seed: int = 1234
    early_stop_patience: int | None = Field(None, ge=1, description="evaluations without improvement")


class CheckpointConfig(_Section):
    save_every: int = Field(5, ge=1)
    keep_checkpoints: int = Field(2, ge=1, description="iter_* checkpoints kept (best/last always)")
    trajectory_samples: int = Field(8, ge=0, description="trajectories saved per iteration")


class GuardConfig(_Section):
    halt_on_nan: bool = True
    grad_norm_limit: float = Field(1e4, gt=0.0, description="halt when the pre-clip grad norm exceeds this")
    kl_limit: float | None = Field(None, gt=0.0, description="halt when KL to the reference exceeds this")


class SFTConfig(_Section):
    sft_data: str = Field("expert", description="'expert' (the env's scripted expert) or a JSONL path")
    demos: int = Field(64, ge=1, description="expert episodes to collect")
    expert_skill: float = Field(1.0, ge=0.0, le=1.0)
    sft_epochs: int = Field(2, ge=1)
    sft_lr: float = Field(1e-4, gt=0.0)
    sft_batch_size: int = Field(8, ge=1, description="sequences per optimizer step")
    val_fraction: float = Field(0.1, ge=0.0, lt=1.0)
    sft_eval_success: bool = Field(True, description="held-out success by rollout after training")


class MonitorConfig(_Section):
    tensorboard: bool = True
    wandb: bool = False
    mlflow: bool = False
    progress: bool = True


SECTIONS: dict[str, type[_Section]] = {
    "model": ModelConfig, "env": EnvConfig, "rollout": RolloutConfig, "algo": AlgoConfig,
    "train": TrainConfig, "curriculum": CurriculumConfig, "eval": EvalConfig, "checkpoint": CheckpointConfig,
    "guards": GuardConfig, "sft": SFTConfig, "monitor": MonitorConfig,
}


class Config(BaseModel):
    """The whole run configuration (one attribute per section, plus ``run_dir``)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())

    run_dir: str = "runs/default"
    model: ModelConfig = Field(default_factory=ModelConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    guards: GuardConfig = Field(default_factory=GuardConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    monitor: MonitorConfig = Field(default_factory=MonitorConfig)

    @classmethod
    def from_flat(cls, base: Config | None = None, **fields: Any) -> Config:
        """A config from flat field names (``lr=1e-5, advantage="gae"``), each routed to its section."""
        raw = base.model_dump() if base is not None else {}
        for name, value in fields.items():
            section = section_of(name)
            if section is None:
                raw[name] = value
            else:
                raw.setdefault(section, {})[name] = value
        return validate(raw)

    def flat(self) -> dict[str, Any]:
        """Every field by its flat name (sections flattened)."""
        out: dict[str, Any] = {"run_dir": self.run_dir}
        for section in SECTIONS:
            out.update(getattr(self, section).model_dump())
        return out


def section_of(field_name: str) -> str | None:
    """The section holding ``field_name`` (None for ``run_dir``); ConfigError for an unknown name."""
    if field_name == "run_dir":
        return None
    for section, model in SECTIONS.items():
        if field_name in model.model_fields:
            return section
    if field_name in SECTIONS:
        raise ConfigError(f"{field_name!r} is a section, not a field; name one of its fields, e.g. "
                          f"{field_name}.{next(iter(SECTIONS[field_name].model_fields))}")
    every = [name for model in SECTIONS.values() for name in model.model_fields]
    raise ConfigError(f"unknown config field {field_name!r}{_did_you_mean(field_name, every)}; "
                      "see `agentic-rl train --help` or docs/config.md")


def _did_you_mean(name: str, valid: Any) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _format_validation_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            parent = err["loc"][:-1]
            model = SECTIONS.get(str(parent[0])) if len(parent) == 1 else (Config if not parent else None)
            valid = f"; valid: {', '.join(model.model_fields)}" if model is not None else ""
            hint = _did_you_mean(str(err["loc"][-1]), model.model_fields) if model is not None else ""
            lines.append(f"unknown config field {where!r}{hint}{valid}")
        else:
            message = err["msg"].removeprefix("Value error, ")  # pydantic's prefix for a validator's own error
            lines.append(f"config field {where!r}: {message} (got {err.get('input')!r})")
    return "\n".join(lines)


def validate(raw: dict[str, Any]) -> Config:
    """Validate a raw mapping into a :class:`Config`; ConfigError names each bad field."""
    if not isinstance(raw, dict):
        raise ConfigError(f"a config must be a mapping of sections, got {type(raw).__name__}")
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc)) from None
    for message in check_risks(config):
        warnings.warn(message, ConfigRiskWarning, stacklevel=3)
    return config


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply ``section.field=value`` overrides (values parsed as YAML) to a raw config mapping."""
    out = yaml.safe_load(yaml.safe_dump(raw)) or {}
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} must look like section.field=value (e.g. train.lr=1e-5)")
        path = key.strip().split(".")
        if len(path) == 1:
            section = section_of(path[0])  # a flat name: route it (ConfigError when unknown)
            path = [path[0]] if section is None else [section, path[0]]
        node = out
        for part in path[:-1]:
            if not isinstance(node.setdefault(part, {}), dict):
                raise ConfigError(f"override {item!r}: {part!r} is not a section")
            node = node[part]
        try:
            node[path[-1]] = _parse_yaml(text) if text.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {item!r}: the value is not valid YAML ({_yaml_problem(exc)})") from None
    return out


def read_yaml(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A config file as a raw mapping, following ``extends:`` (relative to the file)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"{path}: not a file (expected a YAML config)")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not valid UTF-8 (byte {data[exc.start]:#04x}); save the file as "
                          "UTF-8") from None
    try:
        raw = _parse_yaml(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a config must be a mapping of sections, got {type(raw).__name__}")
    parent = raw.pop("extends", None)
    if parent is None:
        return raw
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f"{path}: 'extends' must be the path of another config file, got {parent!r}")
    chain = (*_chain, path.resolve())
    parent_path = path.parent / parent
    if parent_path.resolve() in chain:
        names = " -> ".join(str(p) for p in (*chain, parent_path.resolve()))
        raise ConfigError(f"{path}: 'extends' makes a cycle: {names}")
    if not parent_path.exists():
        raise ConfigError(f"{path}: 'extends' names a config file that does not exist: {parent_path}")
    return _merge(read_yaml(parent_path, chain), raw)


class _ConfigLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key repeated in one mapping is an error.

    PyYAML keeps the last of two equal keys: a second ``train:`` section would silently replace the first.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            # merge keys (<<: *anchor) may legitimately be overridden; only keys written here count
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key_node.value!r} appears twice in one mapping (first on line "
                        f"{seen[key_node.value]})", key_node.start_mark)
                seen[key_node.value] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def _parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_ConfigLoader)  # noqa: S506 - a SafeLoader subclass


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The short reason of a YAML error (PyYAML's own text repeats the input over several lines)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem is None:
        return str(exc)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a YAML config (or the defaults when ``path`` is None), apply overrides, validate."""
    raw = read_yaml(path) if path is not None else {}
    try:
        return validate(apply_overrides(raw, overrides))
    except ConfigError as exc:
        where = f"{path}: " if path is not None else ""
        raise ConfigError(f"{where}{exc}") from None


def save_config(config: Config, path: str | Path) -> None:
    """Write the resolved config as YAML (what ``run_dir/config.yaml`` holds)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config.model_dump(), sort_keys=False), encoding="utf-8")
    tmp.replace(path)


# -- the seed's table: recommended ranges and what goes wrong outside them -----------------------
#: (dotted field, low, high, risk) — checked by :func:`check_risks`.
RISKS: tuple[tuple[str, float, float, str], ...] = (
    ("train.lr", 1e-6, 1e-4, "too high: unstable updates, reward oscillates or collapses; too low: learns nothing"),
    ("sft.sft_lr", 1e-6, 1e-3, "too high: the model forgets language; too low: SFT does not converge"),
    ("algo.gamma", 0.95, 0.99, "discount γ: too low ignores later turns; 1.0 gives high-variance long-horizon credit"),
    ("rollout.epsilon", 0.0, 0.3, "exploration rate: too high floods the batch with off-policy forced actions"),
    ("rollout.explore_kinds", 0.0, 0.3, "kind exploration: too high trains mostly on forced openers (biased updates)"),
    ("env.max_turns", 2, 50, "max env steps: too small and the agent cannot finish; too large and episodes are slow"),
    ("train.token_budget", 256, 65536, "micro-batch size: too large runs out of memory; too small is slow"),
)


def _get(config: Config, dotted: str) -> Any:
    section, name = dotted.split(".")
    return getattr(getattr(config, section), name)


def check_risks(config: Config) -> list[str]:
    """Messages for values outside :data:`RISKS` and for exploration that does not decay."""
    messages = []
    for dotted, low, high, risk in RISKS:
        if dotted == "algo.gamma" and config.algo.advantage not in ("gae", "reinforce_pp"):
            continue  # outcome estimators do not discount
        value = _get(config, dotted)
        if value is not None and not low <= value <= high:
            messages.append(f"{dotted}={value} is outside the recommended range [{low:g}, {high:g}]: {risk}")
    rollout = config.rollout
    if rollout.epsilon > 0 and rollout.epsilon_final >= rollout.epsilon:
        messages.append(f"rollout.epsilon={rollout.epsilon} does not decay (epsilon_final={rollout.epsilon_final}): "
                        "exploration should fall as the policy improves, or it caps the success rate")
    if rollout.explore_kinds > 0 and rollout.explore_kinds_final >= rollout.explore_kinds:
        messages.append(f"rollout.explore_kinds={rollout.explore_kinds} does not decay (explore_kinds_final="
                        f"{rollout.explore_kinds_final}): forced openers should fade as the policy improves")
    episodes = rollout.group_size * rollout.tasks_per_iteration
    if episodes > 1024:
        messages.append(f"{episodes} episodes per iteration (group_size × tasks_per_iteration): memory and time "
                        "per iteration grow with it")
    if config.algo.advantage == "gae" and config.algo.vf_coef == 0:
        messages.append("algo.vf_coef=0 with advantage gae: the value head never learns, advantages stay noisy")
    return messages
