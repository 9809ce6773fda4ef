"""The ``agentic-rl`` entry point shows a bad task file's or config's message, not a traceback."""

from __future__ import annotations

import sys

import pytest
import typer

from agentic_rl import cli
from agentic_rl.tasks import TaskSet


def test_task_file_error_inside_a_command_is_a_message_and_exit_code_2(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"id": "a", "prompt": "p", "difficulty": "hard"}\n')
    app = typer.Typer()

    @app.command()
    def load() -> None:  # stands in for a command that reads env.task_file deep inside (e.g. train)
        TaskSet.load(bad)

    monkeypatch.setattr(cli, "app", app)
    monkeypatch.setattr(sys, "argv", ["agentic-rl"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert f"error: {bad}:1: field 'difficulty' must be an integer >= 0, got 'hard'" in err
