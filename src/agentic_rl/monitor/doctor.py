"""``doctor``: diagnose a training run from its metrics, evaluations, events and trajectory samples.

Each check returns a :class:`Diagnosis` (what fired, the evidence, the remedies) or nothing:

=====================  ==========================================================================
``reward_flat``        ``reward/mean`` does not move: trend and spread both under 2 % of the reward scale
``reward_oscillating`` ``reward/mean`` swings up and down (≥ 60 % sign flips) with little net progress
``reward_hacking``     audit flags in the sampled trajectories, ``audit/flagged_rate`` ≥ 10 %, or reward
                       rising while success does not
``late_degradation``   held-out success fell ≥ 0.1 below its peak while train reward kept its level
``env_failures``       env errors/timeouts ≥ 5 % of episodes, or parse / invalid / tool errors ≥ 25 % of turns
``entropy_collapse``   ``policy/entropy`` fell under 10 % of its start (or under 0.02)
``kl_blowup``          ``policy/kl`` over the limit (config ``guards.kl_limit``, else 1.0) or ×10 its early level
``numerical``          non-finite metrics (logged as null) or guard trips in ``events.jsonl``
``failed_groups``      ≥ 50 % of the groups an update learns from have no success, and success does not rise
=====================  ==========================================================================

Checks whose inputs are missing are skipped and listed in ``skipped`` (with the missing file), so a
half-written run still gets a diagnosis of what exists. Exit codes of ``agentic-rl doctor``: 0 = nothing
fired, 1 = at least one diagnosis fired, 2 = no run data at all (wrong path or empty directory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median, pstdev

from agentic_rl.monitor.rundir import RunData, checkpoints, config_get, load_run

FLAT_TOL = 0.02
SWING_FLIPS = 0.6
DEGRADE_DROP = 0.10
ENV_ERROR_RATE = 0.05
ACTION_ERROR_RATE = 0.25
ENTROPY_RATIO = 0.10
KL_DEFAULT_LIMIT = 1.0
FAILED_GROUP_SHARE = 0.5


@dataclass
class Diagnosis:
    name: str
    title: str
    evidence: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)
    severity: str = "warning"  # "warning" or "error"


@dataclass
class DoctorReport:
    run_dir: Path
    diagnoses: list[Diagnosis] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # check -> why
    notes: list[str] = field(default_factory=list)  # what is missing in the run dir
    has_data: bool = True

    @property
    def exit_code(self) -> int:
        if not self.has_data:
            return 2
        return 1 if self.diagnoses else 0

    def names(self) -> list[str]:
        return [d.name for d in self.diagnoses]

    def to_text(self) -> str:
        lines = [f"doctor: {self.run_dir}"]
        lines += [f"  note: {n}" for n in self.notes]
        if not self.has_data:
            lines.append("  no run data found: nothing to diagnose")
            return "\n".join(lines)
        if not self.diagnoses:
            lines.append("  healthy: no diagnosis fired")
        for d in self.diagnoses:
            lines.append(f"\n[{d.severity.upper()}] {d.name}: {d.title}")
            lines += [f"  evidence: {e}" for e in d.evidence]
            lines += [f"  remedy:   {r}" for r in d.remedies]
        for check, why in self.skipped.items():
            lines.append(f"  skipped {check}: {why}")
        return "\n".join(lines)


# -- helpers --------------------------------------------------------------------------------------
def _values(series: list[tuple[int, float]]) -> list[float]:
    return [v for _, v in series]


def _thirds(values: list[float]) -> tuple[float, float]:
    k = max(1, len(values) // 3)
    return sum(values[:k]) / k, sum(values[-k:]) / k


def reward_scale(run: RunData) -> float:
    """A scale for "small" reward changes: the observed reward span (per-episode min..max), at least 1e-6."""
    lows = _values(run.series("reward/min")) or _values(run.series("reward/mean"))
    highs = _values(run.series("reward/max")) or _values(run.series("reward/mean"))
    return max(max(highs) - min(lows), 1e-6) if lows and highs else 1.0


def _fmt(x: float) -> str:
    return f"{x:.3g}"


# -- checks ---------------------------------------------------------------------------------------
def check_reward(run: RunData) -> list[Diagnosis]:
    rewards = _values(run.series("reward/mean"))
    if len(rewards) < 6:
        raise LookupError(f"needs ≥ 6 iterations of reward/mean, found {len(rewards)}")
    scale = max(reward_scale(run), 0.1)
    first, last = _thirds(rewards)
    spread = pstdev(rewards)
    diffs = [b - a for a, b in zip(rewards, rewards[1:], strict=False)]
    flips = sum(1 for a, b in zip(diffs, diffs[1:], strict=False) if a * b < 0) / max(len(diffs) - 1, 1)
    swing = sum(abs(d) for d in diffs) / len(diffs)
    lr = run.series("optim/lr")
    lr_text = f"learning rate {_fmt(lr[-1][1])}" if lr else f"learning rate {config_get(run.config, 'train', 'lr')}"
    evidence = [f"reward/mean over {len(rewards)} iterations: first third {_fmt(first)}, last third {_fmt(last)}, "
                f"std {_fmt(spread)}, reward scale {_fmt(scale)}", lr_text]
    evidence += _distribution_evidence(run)
    out = []
    if abs(last - first) < FLAT_TOL * scale and spread < FLAT_TOL * scale:
        out.append(Diagnosis("reward_flat", "reward is flat: the policy is not learning", evidence, [
            "check the reward reaches the policy: are groups all-equal (zero advantage) and filtered out?",
            "raise the learning rate a little or train more layers; warm up with SFT on expert demonstrations",
            "make the task easier (curriculum start level) so some episodes succeed",
            "a noisy env hides progress: evaluate with fixed seeds and smooth rewards (larger group size)"]))
    elif len(rewards) >= 8 and flips >= SWING_FLIPS and swing >= 0.1 * scale and abs(last - first) < 2 * swing:
        evidence.insert(1, f"{flips:.0%} of consecutive changes flip sign; mean swing {_fmt(swing)} per iteration")
        out.append(Diagnosis("reward_oscillating", "reward oscillates instead of improving", evidence, [
            "lower the learning rate (e.g. ÷3) and/or clip gradients harder (train.max_grad_norm)",
            "smooth the reward signal: larger group size, reward normalisation, fewer outlier rewards",
            "a noisy env: fix seeds for evaluation, average more episodes per iteration",
            "reduce update epochs / minibatches per iteration (smaller policy steps)"]))
    return out


def _distribution_evidence(run: RunData) -> list[str]:
    rewards = [t.total_reward for _, t in run.all_trajectories()]
    if len(rewards) < 4:
        return []
    mid = median(rewards)
    mad = median(abs(r - mid) for r in rewards) or pstdev(rewards) or 1e-9
    outliers = [r for r in rewards if abs(r - mid) > 5 * mad]
    text = (f"sampled episode rewards: n={len(rewards)}, min {_fmt(min(rewards))}, median {_fmt(mid)}, "
            f"max {_fmt(max(rewards))}")
    if outliers:
        text += f"; {len(outliers)} outlier(s) beyond 5 MAD (e.g. {_fmt(outliers[0])})"
    return [text]


def check_hacking(run: RunData) -> list[Diagnosis]:
    from agentic_rl.evaluate.audit import KNOWN_HACKS, audit

    labelled = run.all_trajectories()
    flagged_rate = _values(run.series("audit/flagged_rate"))
    if not labelled and not flagged_rate and not run.series("reward/mean"):
        raise LookupError("no trajectories/ samples and no audit or reward metrics")
    evidence: list[str] = []
    trajs = [t for _, t in labelled]
    report = audit(trajs) if trajs else None
    if report is not None:
        counts = report.counts()
        hacks = {k: v for k, v in counts.items() if k in KNOWN_HACKS or k == "reward_farming"}
        high = counts.get("high_reward_failure", 0)
        if hacks:
            evidence.append("known hack patterns in sampled trajectories: "
                            + ", ".join(f"{k} ×{v}" for k, v in sorted(hacks.items())))
        if high and high >= 0.1 * len(trajs):
            evidence.append(f"{high}/{len(trajs)} sampled episodes earned high reward but failed the success check")
        shown: set[str] = set()
        for flag in report.flags:  # one example per kind keeps the evidence short
            if flag.kind not in shown and len(shown) < 5:
                shown.add(flag.kind)
                evidence.append(f"e.g. iter {labelled[flag.episode][0]} task {flag.task_id}: {flag.kind} "
                                f"({flag.evidence})")
    if flagged_rate and max(flagged_rate) >= 0.1:
        evidence.append(f"audit/flagged_rate reached {max(flagged_rate):.0%} during training")
    rewards, success = _values(run.series("reward/mean")), _values(run.series("success/train"))
    if len(rewards) >= 6 and len(success) >= 6:
        r0, r1 = _thirds(rewards)
        s0, s1 = _thirds(success)
        if r1 - r0 > 0.2 * max(reward_scale(run), 0.1) and s1 - s0 <= 0.02:
            evidence.append(f"reward/mean rose {_fmt(r0)} → {_fmt(r1)} while success/train stayed {_fmt(s0)} → "
                            f"{_fmt(s1)}: reward comes from something other than solving the task")
    if not evidence:
        return []
    failed = [(i, t) for i, t in labelled if not t.success]
    if failed:
        top = sorted(failed, key=lambda it: -it[1].total_reward)[:3]
        evidence.append("top-reward failed episodes: " + "; ".join(
            f"iter {i} {t.task_id} reward {_fmt(t.total_reward)} ({t.termination})" for i, t in top))
    return [Diagnosis("reward_hacking", "the policy may be exploiting the reward instead of solving tasks",
                      evidence, [
                          "inspect the flagged trajectories in the report (agentic-rl report RUN_DIR)",
                          "close the loophole in the env/checker: read-only tests, hidden tests outside the "
                          "workspace, block exit tricks and start-up hooks",
                          "cap or remove intermediate (shaping) rewards that can be farmed; make shaping "
                          "potential-based and keep the outcome term dominant",
                          "add penalties for the detected hack kinds and keep auditing during training"],
                      severity="error")]


def _heldout_series(run: RunData) -> list[tuple[int, float]]:
    series = run.series("success/heldout")
    if series:
        return series
    rows = [r for r in run.evals if r.get("split") not in (None, "train") and not r.get("perturbation")
            and isinstance(r.get("success_rate"), (int, float)) and isinstance(r.get("iteration"), int)]
    return [(int(r["iteration"]), float(r["success_rate"])) for r in rows]


def check_degradation(run: RunData) -> list[Diagnosis]:
    heldout = _heldout_series(run)
    if len(heldout) < 3:
        raise LookupError(f"needs ≥ 3 held-out evaluations (success/heldout or eval.jsonl), found {len(heldout)}")
    peak_it, peak = max(heldout, key=lambda p: (p[1], -p[0]))
    last_it, last = heldout[-1]
    if last_it <= peak_it or peak - last < DEGRADE_DROP:
        return []
    train = run.series("reward/mean")
    at_peak = [v for it, v in train if it <= peak_it]
    after = [v for it, v in train if it > peak_it]
    if at_peak and after and sum(after[-3:]) / len(after[-3:]) < at_peak[-1] - 0.05 * max(reward_scale(run), 0.1):
        return []  # train reward fell too: that is collapse, reported by the other checks
    evidence = [f"held-out success peaked at {peak:.2f} (iteration {peak_it}) and is {last:.2f} at iteration {last_it}"]
    if at_peak and after:
        evidence.append(f"train reward/mean {_fmt(at_peak[-1])} at the peak → {_fmt(after[-1])} now")
    ckpts = checkpoints(run.run_dir)
    best = "checkpoints/best exists: use it" if "best" in ckpts else "no checkpoints/best saved"
    return [Diagnosis("late_degradation", "held-out success is falling while training goes on (overfitting)",
                      evidence, [f"use the best checkpoint, not the last ({best})",
                                 "early stopping on held-out success (eval.early_stop_patience)",
                                 "replay past successes (train.replay_capacity) or mix SFT data back in",
                                 "lower the learning rate / add a KL penalty to the reference policy",
                                 "train on more varied tasks (curriculum, perturbations)"])]


def check_env_failures(run: RunData) -> list[Diagnosis]:
    kinds = {"rollout/env_error_rate": ENV_ERROR_RATE, "rollout/timeout_rate": ENV_ERROR_RATE,
             "rollout/parse_error_rate": ACTION_ERROR_RATE, "rollout/invalid_action_rate": ACTION_ERROR_RATE,
             "rollout/tool_error_rate": ACTION_ERROR_RATE}
    present = {k: _values(run.series(k)) for k in kinds if run.series(k)}
    trajs = [t for _, t in run.all_trajectories()]
    if not present and not trajs:
        raise LookupError("no rollout/*_rate metrics and no trajectory samples")
    evidence = []
    for name, values in present.items():
        recent = values[-max(3, len(values) // 4):]
        rate = sum(recent) / len(recent)
        if rate >= kinds[name]:
            evidence.append(f"{name} = {rate:.1%} over the last {len(recent)} iterations (threshold {kinds[name]:.0%})")
    errors = [t.termination for t in trajs if t.termination.startswith("error:")]
    if trajs and len(errors) >= ENV_ERROR_RATE * len(trajs) and errors:
        by_kind: dict[str, int] = {}
        for e in errors:
            by_kind[e] = by_kind.get(e, 0) + 1
        evidence.append(f"{len(errors)}/{len(trajs)} sampled episodes ended in an error: "
                        + ", ".join(f"{k} ×{v}" for k, v in sorted(by_kind.items())))
    if not evidence:
        return []
    return [Diagnosis("env_failures", "environment failures, timeouts or illegal actions are frequent", evidence, [
        "timeouts: raise the sandbox / step time limits, or lower max_new_tokens so actions finish",
        "env errors: run `agentic-rl check-env` on the env and fix the crashing step",
        "illegal/parse errors: penalise invalid actions (invalid_action_penalty), warm up with SFT on expert "
        "demonstrations, show admissible actions in the prompt"])]


def check_entropy(run: RunData) -> list[Diagnosis]:
    entropy = _values(run.series("policy/entropy"))
    if len(entropy) < 4:
        raise LookupError(f"needs ≥ 4 iterations of policy/entropy, found {len(entropy)}")
    start = median(entropy[:3])
    end = sum(entropy[-2:]) / 2
    if start <= 0 or not (end < ENTROPY_RATIO * start or end < 0.02):
        return []
    return [Diagnosis("entropy_collapse", "policy entropy collapsed: exploration has stopped",
                      [f"policy/entropy {_fmt(start)} at the start → {_fmt(end)} now ({end / start:.0%})"], [
                          "add an entropy bonus (algo.entropy_coef) or raise the sampling temperature",
                          "clip-higher (algo.clip_high > clip_low) keeps low-probability tokens alive",
                          "lower the learning rate; ε-greedy exploration over admissible actions"])]


def check_kl(run: RunData) -> list[Diagnosis]:
    kl = _values(run.series("policy/kl"))
    if len(kl) < 3:
        raise LookupError(f"needs ≥ 3 iterations of policy/kl, found {len(kl)}")
    limit = config_get(run.config, "guards", "kl_limit") or KL_DEFAULT_LIMIT
    early = max(median(kl[: max(2, len(kl) // 4)]), 1e-4)
    peak = max(kl)
    if peak <= limit and not (peak > 10 * early and peak > 0.1):
        return []
    return [Diagnosis("kl_blowup", "KL to the reference policy blew up: the policy moved too far too fast",
                      [f"policy/kl peaked at {_fmt(peak)} (early level {_fmt(early)}, limit {_fmt(limit)})"], [
                          "lower the learning rate; fewer update epochs per batch",
                          "add or raise the KL penalty (algo.kl_coef), tighten the PPO clip range",
                          "set guards.kl_limit to stop the run before it degrades"], severity="error")]


def check_numerical(run: RunData) -> list[Diagnosis]:
    if not run.metrics and not run.events:
        raise LookupError("no metrics.jsonl or events.jsonl")
    nulls = run.null_metrics()
    trips = [e for e in run.events if e.get("event") in ("guard_trip", "non_finite", "nan")]
    if not nulls and not trips:
        return []
    evidence = [f"{name} was non-finite at iteration(s) {its[:5]}" for name, its in sorted(nulls.items())][:6]
    evidence += [f"event {e.get('event')} at iteration {e.get('iteration')}: "
                 + ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("time", "iteration", "event"))
                 for e in trips[:4]]
    return [Diagnosis("numerical", "non-finite values or guard trips during training", evidence, [
        "lower the learning rate and keep gradient clipping on (train.max_grad_norm)",
        "train in fp32 on CPU; check for empty batches or zero-length responses",
        "resume from the last good checkpoint"], severity="error")]


def check_failed_groups(run: RunData) -> list[Diagnosis]:
    share = _values(run.series("update/failed_group_share"))
    if len(share) < 4:
        raise LookupError(f"needs ≥ 4 iterations of update/failed_group_share, found {len(share)}")
    recent = share[-max(3, len(share) // 3):]
    level = sum(recent) / len(recent)
    success = _values(run.series("success/train"))
    first, last = _thirds(success) if success else (0.0, 0.0)
    if level < FAILED_GROUP_SHARE or last > first + 0.05:
        return []
    evidence = [f"{level:.0%} of the groups in the last {len(recent)} updates had no success: their reward "
                "spread is only step costs, penalties and shaping",
                f"success/train {first:.2f} (first third) → {last:.2f} (last third)"]
    answers = _values(run.series("actions/answer"))
    if answers:
        early, late = _thirds(answers)
        evidence.append(f"actions/answer {early:.2f} → {late:.2f} (a rising share: the policy gives up sooner)")
    return [Diagnosis("failed_groups", "most updates learn from groups without a success: the policy is taught "
                      "to fail cheaply", evidence, [
                          "drop such groups (train.drop_failed_groups=true): group normalisation turns their "
                          "small cost differences into full-size advantages",
                          "give the policy successes to learn from: SFT warm-up on expert demonstrations, an "
                          "easier curriculum start, larger groups, or expert-prefix guidance (rollout.guide_failed)"])]


CHECKS: dict[str, Callable[[RunData], list[Diagnosis]]] = {
    "reward": check_reward, "reward_hacking": check_hacking, "late_degradation": check_degradation,
    "env_failures": check_env_failures, "entropy_collapse": check_entropy, "kl_blowup": check_kl,
    "numerical": check_numerical, "failed_groups": check_failed_groups,
}


def diagnose(run_dir: str | Path | RunData) -> DoctorReport:
    """Run every check on a run dir (or already loaded :class:`RunData`)."""
    run = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    report = DoctorReport(run.run_dir, notes=list(run.notes))
    report.has_data = run.exists and bool(run.metrics or run.evals or run.trajectories or run.events)
    if not report.has_data:
        return report
    for name, check in CHECKS.items():
        try:
            report.diagnoses.extend(check(run))
        except LookupError as exc:
            report.skipped[name] = str(exc)
    return report
