"""``agentic-rl report RUN_DIR`` and ``agentic-rl doctor RUN_DIR``."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to ``app``."""

    @app.command("report")
    def report_command(
        run_dir: Path = typer.Argument(..., help="the run directory (written by train)"),
        out: Path | None = typer.Option(None, "--out", "-o", help="HTML file (default RUN_DIR/report.html)"),
    ) -> None:
        """Write a self-contained HTML report: plots, evals, before/after, failures, hacking flags, trajectories.

        A missing or half-written run dir still gets a report that lists what is missing.
        """
        from agentic_rl.monitor.report import write_report
        from agentic_rl.monitor.rundir import load_run

        run = load_run(run_dir)
        for note in run.notes:
            typer.echo(f"note: {note}", err=True)
        path = write_report(run_dir, out)
        typer.echo(f"report written to {path}")

    @app.command("doctor")
    def doctor_command(
        run_dir: Path = typer.Argument(..., help="the run directory (written by train)"),
        json_output: bool = typer.Option(False, "--json", help="print the diagnoses as JSON"),
    ) -> None:
        """Diagnose a run: flat/oscillating reward, reward hacking, late degradation, env failures, entropy
        collapse, KL blow-up, non-finite values — each with evidence and remedies.

        Exit code: 0 = healthy (nothing fired), 1 = at least one diagnosis fired, 2 = no run data found.
        """
        from agentic_rl.monitor.doctor import diagnose

        report = diagnose(run_dir)
        if json_output:
            typer.echo(json.dumps({"run_dir": str(report.run_dir), "exit_code": report.exit_code,
                                   "diagnoses": [asdict(d) for d in report.diagnoses], "skipped": report.skipped,
                                   "notes": report.notes}, indent=1))
        else:
            typer.echo(report.to_text())
        raise typer.Exit(report.exit_code)
