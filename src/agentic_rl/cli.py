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
    app()


if __name__ == "__main__":
    main()
