"""The ``agentic-rl`` command line. Each stage registers its own commands (``<stage>/commands.py``)."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="agentic-rl",
    help="Train LLM agents with RL in sandboxed, resettable environments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Order = order in --help. Every module defines `register(app: typer.Typer) -> None`.
_COMMAND_MODULES = (
    "agentic_rl.env.commands",  # envs, check-env
    "agentic_rl.envs.commands",  # play
    "agentic_rl.train.commands",  # sft, train
    "agentic_rl.evaluate.commands",  # eval
    "agentic_rl.monitor.commands",  # report, doctor
)

for _name in _COMMAND_MODULES:
    importlib.import_module(_name).register(app)


@app.command()
def version() -> None:
    """Print the installed version."""
    from agentic_rl import __version__

    typer.echo(__version__)


def main() -> None:
    from agentic_rl.config import ConfigError
    from agentic_rl.tasks.core import TaskFileError

    try:
        app()
    except (ConfigError, TaskFileError) as exc:
        # Some commands meet a bad task file or config deep inside (train reads env.task_file only after
        # loading the model). The message already names the file, line and field: show it, not a traceback.
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
