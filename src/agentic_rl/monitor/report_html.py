"""HTML building blocks of the run report: page shell, tables, trajectory browser. Everything escaped."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentic_rl.rollout.trajectory import Trajectory

MAX_CELL = 1200

STYLE = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;background:#f5f6f8;color:#222}
header{background:#243447;color:#fff;padding:16px 28px}header h1{margin:0;font-size:22px}
header .sub{color:#cfd8e3;font-size:13px;margin-top:4px}
main{padding:8px 28px 40px}section{background:#fff;border:1px solid #e2e5ea;border-radius:6px;margin:16px 0;
padding:12px 18px}h2{font-size:17px;margin:4px 0 10px}
.grid{display:flex;flex-wrap:wrap;gap:12px}.chart{display:block}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{border:1px solid #e0e0e0;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f0f2f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:12px;max-height:260px;overflow:auto}
pre.full{max-height:none}
.note{color:#8a5a00;background:#fff7e0;border:1px solid #f0d79a;padding:6px 10px;border-radius:4px;margin:4px 0}
.ok{color:#1b7a2f}.bad{color:#b3261e;font-weight:bold}.muted{color:#888}
details{border:1px solid #e2e5ea;border-radius:4px;margin:6px 0;padding:4px 8px}summary{cursor:pointer}
.diag{border-left:4px solid #e0a800;padding:4px 10px;margin:8px 0}.diag.error{border-color:#b3261e}
"""


def fmt(value: Any) -> str:
    """Numbers to short text; ``None``/NaN to an en dash (missing, not zero)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        return f"{value:.3g}" if abs(value) < 1e5 else f"{value:.3e}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)[:MAX_CELL]
    return str(value)


def clip(text: str, limit: int = MAX_CELL) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def page(title: str, subtitle: str, sections: Iterable[str]) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><header><h1>{escape(title)}</h1><div class='sub'>"
            f"{escape(subtitle)}</div></header><main>{''.join(sections)}</main></body></html>")


def section(title: str, body: str, anchor: str = "") -> str:
    ident = f" id='{escape(anchor)}'" if anchor else ""
    return f"<section{ident}><h2>{escape(title)}</h2>{body}</section>"


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, empty: str = "none") -> str:
    if not rows:
        return f"<p class='muted'>{escape(empty)}</p>"
    columns = list(columns or dict.fromkeys(k for row in rows for k in row))
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c)
            cls = " class='num'" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
            cells.append(f"<td{cls}>{escape(fmt(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def notes(items: Sequence[str]) -> str:
    return "".join(f"<div class='note'>{escape(n)}</div>" for n in items)


def trajectory_details(traj: Trajectory, label: str, open_: bool = False) -> str:
    """One collapsible episode: header line, then a table of turns with reward terms and errors."""
    status = "<span class='ok'>success</span>" if traj.success else "<span class='bad'>failed</span>"
    head = (f"{escape(label)} · task <b>{escape(str(traj.task_id))}</b> · {status} · reward "
            f"{escape(fmt(traj.total_reward))} · {traj.num_turns} turns · {escape(traj.termination)}")
    rows = []
    for i, turn in enumerate(traj.turns):
        terms = ", ".join(f"{k}={fmt(float(v))}" for k, v in (turn.reward_terms or {}).items()) or "–"
        info = turn.info or {}
        extra = [f"error={info['error']}"] if info.get("error") else []
        if info.get("hack_flags"):
            extra.append("hack_flags=" + ",".join(map(str, info["hack_flags"])))
        if info.get("action_kind"):
            extra.append(f"kind={info['action_kind']}")
        rows.append(f"<tr><td class='num'>{i}</td><td><pre>{escape(clip(turn.observation or ''))}</pre></td>"
                    f"<td><pre>{escape(clip(turn.action or ''))}</pre></td><td class='num'>{escape(fmt(turn.reward))}"
                    f"</td><td>{escape(terms)}</td><td>{escape(' '.join(extra))}</td></tr>")
    final = traj.metadata.get("final_observation") if traj.metadata else None
    tail = f"<p class='muted'>final observation:</p><pre>{escape(clip(str(final)))}</pre>" if final else ""
    body = ("<table><tr><th>#</th><th>observation</th><th>action</th><th>reward</th><th>reward terms</th>"
            f"<th>info</th></tr>{''.join(rows)}</table>{tail}")
    return f"<details{' open' if open_ else ''}><summary>{head}</summary>{body}</details>"
