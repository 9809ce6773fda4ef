"""The main job (``make demo``): imitation → strategy on the embedded SmolLM2-135M, on 2 CPU cores.

Stages:

1. evaluate the base model on held-out tool-use tasks (it does not know the action format: ≈0 %);
2. collect demonstrations from an *imperfect* scripted teacher, SFT on them, evaluate;
3. RL from the environment's reward (GRPO, curriculum, periodic eval, keep-best), evaluate the best
   checkpoint;
4. print the before/after table (base → teacher → SFT → RL), write the HTML report and point at it and
   at ``agentic-rl doctor``.

The tasks need *strategy*, not only format: some questions are answered from the prompt (a tool only
costs a step), some need one tool, some two in sequence. The teacher's mistakes are per-family habits
(it calls tools it does not need, guesses where it needs one). Measured on this model, SFT does not
learn per-family habits: its first move follows the *global* majority of the demonstrations' first
moves (see docs/envs/tool_use.md). So the teacher's skill is set where most demonstrations start by
answering: greedy imitation then answers at once — right only where no tool is needed, never by
accident on a family that needs one — while the sampled policy still calls tools often enough for RL
to learn *when* to call *which* tool. Held-out success is reported greedy and sampled at the training
temperature, and per family.

Usage: ``python -m agentic_rl.demo [--quick] [--model NAME_OR_DIR] [--run-dir DIR] [--set key=value ...]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

FAMILIES = ("direct", "calc", "lookup", "lookup_calc")
#: the demo's curriculum levels, each a *contrast* to learn: level 0 pairs "answer from the question"
#: (``direct``) with "needs the calculator" (``calc``); level 1 pairs one lookup (``lookup``) with a lookup
#: followed by a calculation (``lookup_calc``). Measured: a level of ``direct`` alone taught "never call
#: tools" (held-out 52 % → 27 % in 4 iterations), and a level of ``lookup`` alone taught "answer after a
#: lookup", which cut the SFT policy's chance of calling the calculator after a lookup on ``lookup_calc``
#: questions from 14 % to 5 % before it ever trained on them.
DEMO_LEVELS = {"direct": 0, "calc": 0, "convert": 0, "lookup": 1, "lookup_calc": 1, "compare": 2}


@dataclass
class DemoSettings:
    """Every knob of the demo. The defaults are the measured full run (see BENCHMARKS.md)."""

    model: str = "smollm2-135m"
    run_dir: str = "runs/demo"
    seed: int = 0
    families: tuple[str, ...] = FAMILIES
    tasks_per_family: int = 60  # generated per family (train + test)
    test_tasks_per_family: int = 12  # held-out tasks evaluated per family
    max_turns: int = 4
    max_new_tokens: int = 40
    #: SFT trains every block: with the top 8 even 128 flawless demonstrations taught the two-step family
    #: 3 times in 12 (all 30: 12 in 12), and the imperfect teacher's SFT never sampled it right, so RL had
    #: nothing to reinforce. RL then trains the top 16 (its updates took ≈ 25 % less time than with all 30).
    trainable_layers: int = 30
    rl_trainable_layers: int | None = 16  # blocks RL trains (None: the same as SFT)
    teacher_skill: float = 0.3  # the teacher follows its habit with probability 1 - skill
    #: per family, the teacher's habit rate where it differs from 1 - skill (the env's ``habit_rates``)
    teacher_habits: dict[str, float] = field(default_factory=dict)
    demos: int = 128
    demo_weighting: str = "steps"  # "steps": a task is demonstrated ∝ 1 + the tool calls it needs; "uniform"
    sft_epochs: int = 3
    sft_lr: float = 2e-4
    sft_batch_size: int = 8
    sft_schedule: str = "cosine"  # decays to 10 % of sft_lr: the last steps must not swing the policy
    sft_warmup_steps: int = 4
    rl_iterations: int = 8
    tasks_per_iteration: int = 5
    group_size: int = 8
    #: with 16 trainable blocks after a full SFT: 5e-5 collapsed to answering at once (25 %); 2e-5 learned
    #: every family (94–100 % held-out greedy in four runs; BENCHMARKS.md, fifth session)
    lr: float = 2e-5
    minibatches: int = 4  # optimizer steps per iteration (one pass over the batch)
    #: a group without a success only teaches failing cheaply (answer at once instead of trying a tool)
    drop_failed_groups: bool = True
    lower_level_mix: float = 0.25  # share of easier-level tasks once the curriculum promotes
    max_invalid_actions: int = 1  # an unusable action ends the episode (a clear signal; saves time)
    temperature: float = 1.0
    temperature_final: float = 0.85
    eval_every: int = 4
    #: held-out tasks of the periodic evaluations that pick the best checkpoint (the first k of the
    #: family-interleaved test list: 6 per family); the before/after table uses all of them
    eval_tasks: int = 24
    perturbation: str = "distractors"
    quick: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # passed to train_rl as flat config fields


#: a ≈2-minute version of every stage (≈135 s here): a pipeline check, too short for RL to gain on SFT
QUICK = dict(tasks_per_family=24, test_tasks_per_family=6, demos=64, sft_epochs=3, rl_iterations=3,
             tasks_per_iteration=4, group_size=8, eval_every=3, eval_tasks=24, run_dir="runs/demo_quick",
             trainable_layers=8, rl_trainable_layers=None, lr=5e-5)  # the top 8 blocks: half the SFT time


@dataclass
class Row:
    stage: str
    success: float
    ci: tuple[float, float]
    mean_steps: float
    steps_success: float
    mean_reward: float
    perturbed: float | None = None
    robustness: float | None = None
    by_family: dict[str, float] = field(default_factory=dict)  # clean success per task family
    #: mean env steps beyond the task's minimum (its needed tool calls + the answer) over clean successes
    unneeded_steps: float | None = None


@dataclass
class DemoResult:
    rows: list[Row]
    run_dir: Path
    report: Path | None
    seconds: dict[str, float]
    significance: list[dict[str, Any]] = field(default_factory=list)
    #: steps on the held-out tasks both SFT and RL (greedy) solve: {"tasks", "sft", "rl"}
    paired_steps: dict[str, float | int | None] = field(default_factory=dict)

    def row(self, stage: str) -> Row:
        return next(r for r in self.rows if r.stage == stage)


def _row(stage: str, result: Any, perturbation: str | None, families: dict[str, str],
         minimal_steps: dict[str, int]) -> Row:
    clean = result.clean
    pert = result.perturbed.get(perturbation) if perturbation else None
    outcomes: dict[str, list[bool]] = {}
    unneeded = []
    for traj in result.trajectories:
        outcomes.setdefault(families.get(traj.task_id, "?"), []).append(bool(traj.success))
        if traj.success and traj.task_id in minimal_steps:
            unneeded.append(traj.num_turns - minimal_steps[traj.task_id])
    return Row(stage, clean.success_rate, (clean.success_ci_low, clean.success_ci_high), clean.mean_steps,
               clean.mean_steps_success, clean.mean_reward, pert.success_rate if pert else None,
               result.robustness.get(perturbation) if pert else None,
               {name: sum(won) / len(won) for name, won in outcomes.items()},
               sum(unneeded) / len(unneeded) if unneeded else None)


def paired_steps(first: Any, second: Any) -> dict[str, float | int | None]:
    """Mean steps of two evaluations on the tasks *both* solve (clean, one episode per task).

    Each stage's own "steps on successes" averages over different tasks: a policy that starts solving
    two-step tasks raises it while wasting nothing. On the same tasks, fewer steps means fewer calls
    that were not needed.
    """
    won = [{t.task_id: t.num_turns for t in result.trajectories if t.success} for result in (first, second)]
    both = sorted(won[0].keys() & won[1].keys())
    mean = (lambda steps: sum(steps[i] for i in both) / len(both)) if both else (lambda steps: None)
    return {"tasks": len(both), "sft": mean(won[0]), "rl": mean(won[1])}


def build_tasks(settings: DemoSettings) -> tuple[Any, list[Any]]:
    """The demo's task set (train + test splits) and the held-out evaluation tasks, balanced by family."""
    from agentic_rl.envs.tool_use_tasks import generate_tasks
    from agentic_rl.tasks import TaskSet

    generated = generate_tasks(seed=settings.seed, n_per_family=settings.tasks_per_family, families=settings.families)
    tasks = TaskSet([replace(t, difficulty=DEMO_LEVELS.get(t.data.get("family"), t.difficulty)) for t in generated],
                    name=generated.name)
    by_family = [[t for t in tasks.split("test") if t.data.get("family") == family][: settings.test_tasks_per_family]
                 for family in settings.families]
    # interleaved by family, so that the first k held-out tasks (the periodic evaluation) are balanced too
    test = [members[i] for i in range(settings.test_tasks_per_family) for members in by_family if i < len(members)]
    return tasks, test


def demonstration_tasks(settings: DemoSettings, tasks: Any) -> list[Any]:
    """The training tasks the teacher demonstrates (with repeats; the teacher's choices differ per seed).

    ``steps`` weighting draws a task with probability ∝ 1 + the tool calls it needs, so every *decision*
    is about equally represented: a uniform draw gives a two-tool family's second decision (call the
    calculator on a looked-up value) a few examples among a hundred, and the SFT policy took it after a
    lookup in 14 % of samples (49 % with this weighting).
    """
    _check_weighting(settings)
    rng = random.Random(settings.seed)
    if settings.demo_weighting == "uniform":
        return list(tasks.split("train").sample(settings.demos, rng))
    train = list(tasks.split("train"))
    weights = [1 + len(t.data.get("needed", [])) for t in train]
    return rng.choices(train, weights=weights, k=settings.demos)


def _check_weighting(settings: DemoSettings) -> None:
    if settings.demo_weighting not in ("steps", "uniform"):
        raise ValueError(f"demo_weighting must be 'steps' or 'uniform', got {settings.demo_weighting!r}")


class _Stages:
    """Stage headings, timings and the progress line shown throughout the run."""

    def __init__(self, console: Console, total: int):
        self.console, self.total, self.done = console, total, 0
        self.seconds: dict[str, float] = {}
        self.start = time.perf_counter()
        self._name, self._tick = "", 0.0

    def begin(self, name: str) -> None:
        self._name, self._tick = name, time.perf_counter()
        elapsed = time.perf_counter() - self.start
        self.console.rule(f"[bold]stage {self.done + 1}/{self.total}: {name}[/]  (elapsed {elapsed:.0f} s)")

    def end(self, summary: str = "") -> None:
        took = time.perf_counter() - self._tick
        self.seconds[self._name] = round(took, 1)
        self.done += 1
        self.console.print(f"  done in {took:.0f} s. {summary}")


def run_demo(settings: DemoSettings, console: Console | None = None) -> DemoResult:
    """Run the whole pipeline and return the before/after rows (also written to ``run_dir/demo.json``)."""
    import torch

    from agentic_rl.evaluate import compare, evaluate
    from agentic_rl.models import load_policy
    from agentic_rl.monitor.report import write_report
    from agentic_rl.tasks import TaskSet
    from agentic_rl.train import train_rl, train_sft
    from agentic_rl.train.sft import expert_conversations

    console = console or Console()
    _check_weighting(settings)  # before minutes of work, not after
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2 if settings.quick else 4)))
    run_dir = Path(settings.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    stages = _Stages(console, 6)
    env_id, pert = "tool-use-v0", settings.perturbation
    env_kwargs = {"max_invalid_actions": settings.max_invalid_actions}
    teacher_env = dict(env_kwargs)
    if settings.teacher_habits:
        teacher_env["habit_rates"] = dict(settings.teacher_habits)
    common = dict(max_turns=settings.max_turns, max_new_tokens=settings.max_new_tokens, seeds=(settings.seed,))

    def measure(stage: str, policy: Any, *, greedy: bool = True, perturb: bool = True,
                env: dict[str, Any] = env_kwargs) -> tuple[Row, Any]:
        result = evaluate(policy, env_id, test_tasks, greedy=greedy, temperature=settings.temperature,
                          perturbations=[pert] if perturb and pert else [], label=stage, **common, env_kwargs=env)
        row = _row(stage, result, pert if perturb else None, families, minimal_steps)
        rows.append(row)
        return row, result

    rows: list[Row] = []
    stages.begin("load the model and the tasks")
    tasks, test_tasks = build_tasks(settings)
    families = {t.id: str(t.data.get("family")) for t in test_tasks}
    minimal_steps = {t.id: len(t.data.get("needed", [])) + 1 for t in test_tasks}  # the needed calls + the answer
    policy = load_policy(settings.model)
    layers = len(policy.model.model.layers) if hasattr(policy.model, "model") else settings.trainable_layers
    policy = load_policy(settings.model, trainable_layers=min(settings.trainable_layers, layers))
    stages.end(f"{len(tasks.split('train'))} train / {len(test_tasks)} held-out tasks "
               f"({', '.join(settings.families)}); model {settings.model}")

    stages.begin("evaluate the base model and the teacher on held-out tasks")
    base, _ = measure("base model", policy, perturb=False)
    teacher, _ = measure(f"teacher (expert, skill {settings.teacher_skill})", f"expert:{settings.teacher_skill}",
                         env=teacher_env)
    stages.end(f"base {base.success:.0%}, teacher {teacher.success:.0%}")

    stages.begin(f"SFT on {settings.demos} demonstrations of the imperfect teacher")
    conversations = expert_conversations(env_id, teacher_env, demonstration_tasks(settings, tasks),
                                         skill=settings.teacher_skill, seed=settings.seed, max_steps=settings.max_turns)
    sft = train_sft(policy=policy, conversations=conversations, run_dir=str(run_dir / "sft"), env_id=env_id,
                    max_turns=settings.max_turns, demos=settings.demos, expert_skill=settings.teacher_skill,
                    sft_epochs=settings.sft_epochs, sft_lr=settings.sft_lr, sft_batch_size=settings.sft_batch_size,
                    lr_schedule=settings.sft_schedule, warmup_steps=settings.sft_warmup_steps,
                    sft_eval_success=False, seed=settings.seed,
                    progress=lambda m: console.print(f"  epoch {m.get('epoch')}/{m.get('epochs')}: train loss "
                                                     f"{m.get('loss/sft', float('nan')):.3f}, validation loss "
                                                     f"{m.get('loss/sft_val', float('nan')):.3f}"))
    policy = sft.policy
    sft_row, sft_result = measure("SFT (greedy)", policy)
    measure(f"SFT (sampled, T={settings.temperature})", policy, greedy=False, perturb=False)
    stages.end(f"SFT greedy {sft_row.success:.0%}")

    stages.begin(f"RL (GRPO) for {settings.rl_iterations} iterations, curriculum + keep-best")
    rl_dir = run_dir / "rl"
    if settings.rl_trainable_layers is not None:
        policy.set_trainable_layers(min(settings.rl_trainable_layers, layers))

    def on_iteration(m: dict[str, Any]) -> None:
        held = m.get("success/heldout")
        held_txt = f", held-out {held:.0%}" if isinstance(held, (int, float)) else ""
        console.print(f"  iter {m.get('iteration')}: reward {m.get('reward/mean', float('nan')):.2f}, "
                      f"success {m.get('success/train', float('nan')):.0%}{held_txt}, "
                      f"level {m.get('curriculum/level', '-')}, rollout {m.get('time/rollout_s', 0):.0f} s, "
                      f"update {m.get('time/update_s', 0):.0f} s")

    rl_fields = dict(run_dir=str(rl_dir), env_id=env_id, max_turns=settings.max_turns,
                     iterations=settings.rl_iterations, tasks_per_iteration=settings.tasks_per_iteration,
                     group_size=settings.group_size, lr=settings.lr, minibatches=settings.minibatches, temperature=settings.temperature,
                     temperature_final=settings.temperature_final, max_new_tokens=settings.max_new_tokens,
                     eval_every=settings.eval_every, eval_tasks=settings.eval_tasks, use_curriculum=True,
                     seed=settings.seed, advantage="grpo", env_kwargs=env_kwargs,
                     # promote as soon as a level is mostly solved; no demotion in a run this short
                     curriculum_window=16, promote_threshold=0.6, demote_threshold=None,
                     lower_level_mix=settings.lower_level_mix, drop_failed_groups=settings.drop_failed_groups)
    rl_fields.update(settings.extra)
    # held-out evaluation during RL runs on the same balanced test tasks as the before/after table
    rl_tasks = TaskSet(list(tasks.split("train")) + test_tasks, name="demo")
    rl = train_rl(policy=policy, tasks=rl_tasks, progress=on_iteration, **rl_fields)
    best = rl_dir / "checkpoints" / "best"
    if best.exists():
        policy = load_policy(str(best))
    stages.end(f"stop reason: {rl.stop_reason}; best held-out success {rl.best_success} "
               f"at iteration {rl.best_iteration}")

    stages.begin("evaluate the RL policy (best checkpoint)")
    rl_row, rl_result = measure("RL (greedy)", policy)
    measure(f"RL (sampled, T={settings.temperature})", policy, greedy=False, perturb=False)
    comparison = compare([sft_result, rl_result])
    comparison.save(rl_dir / "compare.json")
    stages.end(f"RL greedy {rl_row.success:.0%}")

    stages.begin("write the report")
    report = write_report(rl_dir)
    stages.end(str(report))
    result = DemoResult(rows, run_dir, report, stages.seconds, comparison.to_dict().get("rows", []),
                        paired_steps(sft_result, rl_result))
    (run_dir / "demo.json").write_text(json.dumps(
        {"settings": asdict(settings), "rows": [asdict(r) for r in rows], "seconds": stages.seconds,
         "paired_steps": result.paired_steps,
         "date": time.strftime("%Y-%m-%d"),
         "total_seconds": round(time.perf_counter() - stages.start, 1)}, indent=2, default=str))
    _print_table(console, result, settings)
    return result


def pct(value: float | None) -> str:
    """A table cell for a rate: ``73%``, or ``-`` for missing / NaN (also used by scripts/demo_table.py)."""
    return "-" if value is None or value != value else f"{value:.0%}"


def num(value: float | None) -> str:
    """A table cell for a number: two decimals, or ``-`` for missing / NaN."""
    return "-" if value is None or value != value else f"{value:.2f}"


def _print_table(console: Console, result: DemoResult, settings: DemoSettings) -> None:
    table = Table(title=f"tool-use-v0, {len(result.rows) and 'held-out'} tasks: imitation → strategy")
    for column in ("policy", "success", "95% CI", "mean steps", "steps on successes", "unneeded steps on successes",
                   "mean reward", f"success ({settings.perturbation})", "robustness"):
        table.add_column(column, justify="right" if column != "policy" else "left")
    for r in result.rows:
        table.add_row(r.stage, pct(r.success), f"{pct(r.ci[0])}–{pct(r.ci[1])}", num(r.mean_steps),
                      num(r.steps_success), num(r.unneeded_steps), num(r.mean_reward), pct(r.perturbed),
                      num(r.robustness))
    console.print(table)
    by_family = Table(title="held-out success per family: when to call which tool")
    by_family.add_column("policy")
    for family in settings.families:
        by_family.add_column(family, justify="right")
    for r in result.rows:
        by_family.add_row(r.stage, *(pct(r.by_family.get(family)) for family in settings.families))
    console.print(by_family)
    paired = result.paired_steps
    if paired.get("tasks"):
        console.print(f"Steps on the {paired['tasks']} held-out tasks both SFT and RL (greedy) solve: "
                      f"SFT {num(paired['sft'])} → RL {num(paired['rl'])}.")
    total = sum(result.seconds.values())
    console.print(f"Total {total:.0f} s ({', '.join(f'{k}: {v:.0f} s' for k, v in result.seconds.items())}).")
    console.print(f"Report: {result.report}")
    console.print(f"Diagnose the run: agentic-rl doctor {result.run_dir / 'rl'}")


def parse_settings(argv: list[str] | None = None) -> DemoSettings:
    parser = argparse.ArgumentParser(prog="python -m agentic_rl.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~2-minute version")
    parser.add_argument("--model", default=None, help="embedded model name or a local HF model directory")
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a demo setting (e.g. --set rl_iterations=4; unknown keys are errors), or "
                             "pass a flat RL config field through with an rl. prefix (e.g. --set rl.kl_coef=0.01)")
    args = parser.parse_args(argv)
    settings = DemoSettings()
    if args.quick:
        settings = replace(settings, quick=True, **QUICK)
    known = {f.name: f for f in fields(DemoSettings)}
    updates: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for item in args.set:
        key, sep, raw = item.partition("=")
        if sep and key.startswith("rl.") and len(key) > 3:
            extra[key[3:]] = yaml.safe_load(raw)  # checked by train_rl's typed config, which names the field
            continue
        if not sep or key not in known or key == "extra":
            parser.error(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(known))}")
        current = getattr(settings, key)
        try:
            if isinstance(current, bool):
                value: Any = raw.lower() in ("1", "true", "yes")
            elif isinstance(current, dict):  # e.g. teacher_habits={direct: 1.0}
                value = yaml.safe_load(raw) or {}
                if not isinstance(value, dict):
                    raise ValueError(raw)
            elif isinstance(current, tuple):
                value = tuple(v for v in raw.split(",") if v)
            elif "None" in str(known[key].type):  # an optional knob, e.g. "int | None": null or its type
                base = {"int": int, "float": float, "str": str}[str(known[key].type).split("|")[0].strip()]
                value = None if raw.lower() in ("null", "none") else base(raw)
            else:
                value = type(current)(raw)
        except (ValueError, yaml.YAMLError):
            parser.error(f"--set {item!r}: {raw!r} is not a valid {type(current).__name__}")
        updates[key] = value
    if extra:
        updates["extra"] = extra
    if args.model:
        updates["model"] = args.model
    if args.run_dir:
        updates["run_dir"] = args.run_dir
    return replace(settings, **updates)


def main(argv: list[str] | None = None) -> int:
    settings = parse_settings(argv)
    run_demo(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
