"""``agentic-rl report RUN_DIR``: one self-contained HTML page about a run (no scripts, no network).

Sections: what is missing, doctor diagnoses, config, training plots (reward, success train vs held-out,
entropy, KL, lengths, action distribution, curriculum level, reward terms and shaping share, error
rates, losses), evaluations and the before/after comparison, failure categories, reward-hacking flags,
and a browsable sample of trajectories with reward terms per step. Plots are inline SVG.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from agentic_rl.evaluate.audit import audit, reward_shares
from agentic_rl.evaluate.failures import DESCRIPTIONS, analyze_failures
from agentic_rl.monitor.doctor import DoctorReport, diagnose
from agentic_rl.monitor.report_html import fmt, notes, page, section, table, trajectory_details
from agentic_rl.monitor.rundir import RunData, checkpoints, load_run
from agentic_rl.monitor.svg import bar_chart, line_chart

MAX_TRAJECTORIES = 40
EVAL_COLUMNS = ("iteration", "split", "perturbation", "policy", "episodes", "success_rate", "success_ci_low",
                "success_ci_high", "mean_reward", "mean_steps", "mean_steps_success", "robustness")


def _plots(run: RunData) -> str:
    s = run.series
    charts = [
        line_chart({"mean": s("reward/mean"), "min": s("reward/min"), "max": s("reward/max")}, "Reward per episode"),
        line_chart(_success_series(run), "Success: train vs held-out", y_range=(0.0, 1.0)),
        line_chart({"entropy": s("policy/entropy")}, "Policy entropy", y_label="nats/token"),
        line_chart({"KL": s("policy/kl")}, "KL to reference"),
        line_chart({"response tokens": s("rollout/response_tokens")}, "Response length", y_label="tokens/episode"),
        line_chart({"turns": s("rollout/turns")}, "Turns per episode"),
        line_chart({k.split("/", 1)[1]: s(k) for k in run.metric_names() if k.startswith("actions/")},
                   "Action distribution", y_range=(0.0, 1.0)),
        line_chart({"level": s("curriculum/level")}, "Curriculum level"),
        line_chart({k.split("/", 1)[1]: s(k) for k in run.metric_names() if k.startswith("reward_terms/")},
                   "Reward terms (mean per episode)"),
        line_chart(_shaping_series(run), "Reward share: outcome vs shaping", y_range=(0.0, 1.0)),
        line_chart({k.split("/", 1)[1]: s(k) for k in run.metric_names()
                    if k.startswith("rollout/") and k.endswith("_rate")}, "Error rates", y_range=(0.0, 1.0)),
        line_chart({k: s(k) for k in ("loss/policy", "loss/value", "loss/total") if s(k)}, "Losses"),
        line_chart({k: s(k) for k in ("optim/grad_norm",) if s(k)}, "Gradient norm"),
    ]
    audit_series = {k.split("/", 1)[1]: s(k) for k in run.metric_names()
                    if k.startswith("audit/") and not k.endswith("_share") and s(k)}
    if audit_series:
        charts.append(line_chart(audit_series, "Reward-hacking audit (share of episodes)", y_range=(0.0, 1.0)))
    level_series = {k.split("/", 1)[1]: s(k) for k in run.metric_names() if k.startswith("success/level_")}
    if level_series:
        charts.append(line_chart(level_series, "Success per difficulty level", y_range=(0.0, 1.0)))
    return "<div class='grid'>" + "".join(charts) + "</div>"


def _success_series(run: RunData) -> dict[str, list[tuple[int, float]]]:
    out = {"train": run.series("success/train"), "held-out": run.series("success/heldout")}
    if out["held-out"]:
        return out
    by_split: dict[str, list[tuple[int, float]]] = {}
    for row in run.evals:
        if row.get("perturbation") or not isinstance(row.get("iteration"), int):
            continue
        if isinstance(row.get("success_rate"), (int, float)):
            by_split.setdefault(f"eval {row.get('split', '?')}", []).append((row["iteration"], row["success_rate"]))
    out.update(by_split)
    return out


def _shaping_series(run: RunData) -> dict[str, list[tuple[int, float]]]:
    outcome, shaping = run.series("audit/outcome_share"), run.series("audit/shaping_share")
    if not outcome and run.trajectories:
        for iteration, trajs in sorted(run.trajectories.items()):
            if any(t.turns for t in trajs):
                o, sh = reward_shares(trajs)
                outcome.append((iteration, o))
                shaping.append((iteration, sh))
    return {"outcome": outcome, "shaping": shaping}


def _config_section(run: RunData) -> str:
    if run.config is None:
        return "<p class='muted'>no config.yaml</p>"
    text = yaml.safe_dump(run.config, sort_keys=False, default_flow_style=False)
    return f"<pre class='full'>{html.escape(text)}</pre>"


def _eval_section(run: RunData) -> str:
    rows = run.evals[-60:]
    body = table(rows, [c for c in EVAL_COLUMNS if any(c in r for r in rows)], empty="no eval.jsonl rows")
    last = next((r for r in reversed(run.evals) if not r.get("perturbation")), None)
    if last and isinstance(last.get("per_level"), dict):
        levels = [{"level": k, **v} for k, v in last["per_level"].items() if isinstance(v, dict)]
        body += "<p>Per difficulty level (latest clean evaluation):</p>" + table(levels)
    if last and isinstance(last.get("terminations"), dict):
        body += "<p>Termination reasons (latest clean evaluation):</p>" + table(
            [{"termination": k, "episodes": v} for k, v in last["terminations"].items()])
    return body


def _compare_section(run: RunData) -> str:
    if not run.compare:
        return ("<p class='muted'>no before/after comparison (write one with "
                "<code>agentic-rl eval --compare BEFORE AFTER --out RUN_DIR</code>)</p>")
    rows = run.compare.get("rows", [])
    method = run.compare.get("method", "")
    return table(rows) + (f"<p class='muted'>{html.escape(method)}</p>" if method else "")


def _failure_section(trajs: Sequence[Any]) -> str:
    report = analyze_failures(trajs)
    if not report.failed:
        return "<p class='muted'>no failed episodes in the trajectory samples</p>"
    chart = bar_chart({c: n for c, n in report.counts.items()}, f"Failed episodes by category ({report.failed})",
                      value_format="{:.0f}")
    rows = report.table()
    examples = "".join(trajectory_details(t, f"example of {c} ({DESCRIPTIONS[c]})")
                       for c, t in report.examples.items())
    return chart + table(rows, ["category", "description", "count", "share"]) + examples


def _audit_section(labelled: Sequence[tuple[int, Any]]) -> str:
    trajs = [t for _, t in labelled]
    report = audit(trajs)
    if not report.flags:
        return f"<p class='ok'>no reward-hacking flags in {len(trajs)} sampled episodes</p>"
    rows = [{"iteration": labelled[f.episode][0], "task": f.task_id, "kind": f.kind, "turn": f.turn,
             "source": f.source, "evidence": f.evidence} for f in report.flags[:100]]
    return bar_chart(report.counts(), "Flagged episodes by kind", value_format="{:.0f}") + table(rows)


def _doctor_section(doc: DoctorReport) -> str:
    if not doc.diagnoses:
        parts = ["<p class='ok'>no diagnosis fired</p>"]
    else:
        parts = []
        for d in doc.diagnoses:
            items = "".join(f"<li>{html.escape(e)}</li>" for e in d.evidence)
            fixes = "".join(f"<li>{html.escape(r)}</li>" for r in d.remedies)
            parts.append(f"<div class='diag {d.severity}'><b>{html.escape(d.name)}</b>: {html.escape(d.title)}"
                         f"<br>Evidence:<ul>{items}</ul>Remedies:<ul>{fixes}</ul></div>")
    if doc.skipped:
        parts.append(table([{"check": k, "skipped because": v} for k, v in doc.skipped.items()]))
    return "".join(parts)


def _browser(labelled: Sequence[tuple[int, Any]]) -> str:
    if not labelled:
        return "<p class='muted'>no trajectory samples (trajectories/iter_*.jsonl)</p>"
    last_iters = sorted({it for it, _ in labelled})[-3:]
    chosen = [(it, t) for it, t in labelled if it in last_iters][:MAX_TRAJECTORIES]
    intro = (f"<p>{len(chosen)} episodes from iterations {', '.join(map(str, last_iters))} "
             f"({len(labelled)} sampled in total). Click to expand.</p>")
    return intro + "".join(trajectory_details(t, f"iter {it}", open_=(i == 0)) for i, (it, t) in enumerate(chosen))


def build_report(run_dir: str | Path) -> str:
    """The report page of ``run_dir`` as an HTML string (works for missing / half-written runs)."""
    run = load_run(run_dir)
    doc = diagnose(run)
    labelled = run.all_trajectories()
    trajs = [t for _, t in labelled]
    last = run.last_iteration
    subtitle = (f"{run.run_dir} · iterations logged: {len(run.metrics)}"
                + (f" (last {last})" if last is not None else "")
                + f" · evaluations: {len(run.evals)} · checkpoints: {', '.join(checkpoints(run.run_dir)) or 'none'}")
    sections = []
    if run.notes:
        sections.append(section("What is missing", notes(run.notes), "missing"))
    sections += [
        section("Diagnosis (doctor)", _doctor_section(doc), "doctor"),
        section("Training curves", _plots(run) if run.metrics or run.trajectories else
                "<p class='muted'>no metrics.jsonl: nothing to plot</p>", "plots"),
        section("Evaluations", _eval_section(run), "eval"),
        section("Before / after", _compare_section(run), "compare"),
        section("Failure categories (sampled trajectories)", _failure_section(trajs), "failures"),
        section("Reward-hacking audit (sampled trajectories)", _audit_section(labelled), "audit"),
        section("Trajectories", _browser(labelled), "trajectories"),
        section("Config", _config_section(run), "config"),
    ]
    return page(f"agentic-rl report: {run.run_dir.name or run.run_dir}", subtitle, sections)


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report (default ``RUN_DIR/report.html``; elsewhere when the run dir does not exist)."""
    run_path = Path(run_dir)
    target = Path(out) if out else (run_path / "report.html" if run_path.is_dir() else Path("report.html"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(build_report(run_path), encoding="utf-8")
    return target


__all__ = ["build_report", "fmt", "write_report"]
