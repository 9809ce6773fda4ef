"""CLI commands of this stage (registered on the shared Typer app by agentic_rl.cli)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to ``app``."""
