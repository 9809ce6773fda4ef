"""CLI commands of the env layer: ``agentic-rl envs`` and ``agentic-rl check-env ID``."""

from __future__ import annotations

import json
from typing import Any

import typer


def _parse_kwargs(pairs: list[str]) -> dict[str, Any]:
    """``["max_steps=5", "perturbation=upper"]`` -> dict; values are JSON when they parse, else strings."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--kwarg")
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    return kwargs


def envs() -> None:
    """List the registered environments with a one-line description each."""
    from agentic_rl.env.registry import registered

    specs = registered()
    width = max((len(env_id) for env_id in specs), default=0)
    for env_id, env_spec in specs.items():
        typer.echo(f"{env_id.ljust(width)}  {env_spec.summary()}")


def check_env_command(
    env_id: str = typer.Argument(..., metavar="ID", help="A registered env id, e.g. tool-use-v0."),
    n_random_actions: int = typer.Option(1000, "--n-random-actions", "-n", help="Random actions to send."),
    seed: int = typer.Option(0, help="Seed for the env and the random actions."),
    kwarg: list[str] = typer.Option([], "--kwarg", "-k", help="Env argument KEY=VALUE (repeatable)."),
    skip_gymnasium: bool = typer.Option(False, "--skip-gymnasium", help="Skip Gymnasium's own checker."),
) -> None:
    """Run the contract checks (ours and Gymnasium's) on an env; exit code 1 if any fails."""
    from agentic_rl.env.check import check_env
    from agentic_rl.env.registry import UnknownEnvError

    try:
        report = check_env(env_id, n_random_actions, seed, env_kwargs=_parse_kwargs(kwarg),
                           gymnasium_check=not skip_gymnasium)
    except (UnknownEnvError, TypeError, ImportError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(report.format())
    raise typer.Exit(0 if report.ok else 1)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to ``app``."""
    app.command("envs")(envs)
    app.command("check-env")(check_env_command)
