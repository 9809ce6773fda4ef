"""CLI commands of the built-in environments: ``agentic-rl play ENV`` (a person plays in the terminal)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import typer

_HELP = ("Type one action per line. Plain text is sent as a command (<action>...</action>), or as an answer "
         "if the env takes no commands; text starting with '<' or '```' is sent as written "
         "(e.g. <answer>42</answer>). ':actions' lists the admissible actions, ':hint' asks the scripted "
         "expert, ':quit' stops.")


def register(app: typer.Typer) -> None:
    """Add this stage's commands to ``app``."""
    app.command("play", help="Play an episode of ENV in the terminal, reading actions from stdin.")(play)


def play(
    env_id: str = typer.Argument(..., metavar="ENV", help="Registered env id, e.g. world-v0 (see `agentic-rl envs`)."),
    task: str | None = typer.Option(None, "--task", help="Task id to play (default: drawn from the split)."),
    split: str | None = typer.Option(None, "--split", help="Task split to draw from, e.g. train or test."),
    seed: int = typer.Option(0, "--seed", help="Episode seed (same seed: same task and episode)."),
    perturbation: str | None = typer.Option(None, "--perturbation", help="Robustness perturbation by name."),
    show_actions: bool = typer.Option(True, "--show-actions/--hide-actions",
                                      help="Print the admissible actions after each observation."),
    module: str | None = typer.Option(None, "--module", help="A .py file or module to import first, e.g. "
                                      "one that registers your own env."),
) -> None:
    """Play one episode: observations, reward terms and the end result go to stdout."""
    from agentic_rl.env.registry import make, spec

    try:
        if module:
            _import(module)
        kwargs = _env_kwargs(spec(env_id).load(), split, task, perturbation)
        env = make(env_id, **kwargs)
        observation, info = env.reset(seed=seed, options={"task": task} if task else None)
    except (KeyError, TypeError, ValueError, ImportError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc.args[0] if exc.args else exc}", err=True)
        raise typer.Exit(2) from None
    base = env.unwrapped
    typer.echo(f"{env_id} · task {info.get('task_id')} · seed {seed}" + (f" · {perturbation}" if perturbation else ""))
    typer.echo(_HELP)
    if base.system_prompt():
        typer.echo(f"[system] {base.system_prompt()}")
    typer.echo(f"\n{observation}")
    _show_actions(info, show_actions)
    total, steps, ended = 0.0, 0, ""
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        if line in (":quit", ":q"):
            break
        if line == ":actions":
            _show_actions(info, True)
            continue
        if line == ":hint":
            typer.echo(f"hint: {_hint(base)}")
            continue
        action = _as_action(line, base.accepted_actions)
        observation, reward, terminated, truncated, info = env.step(action)
        total, steps = total + reward, steps + 1
        typer.echo(f"> {action}\n{observation}")
        typer.echo(f"reward {reward:+.3f}  ({_terms(info)})" + (f"  error: {info['error']}" if "error" in info else ""))
        if terminated or truncated:
            ended = "truncated" if truncated and not terminated else ("success" if info.get("success") else "failed")
            break
        _show_actions(info, show_actions)
    env.close()
    if ended:
        typer.echo(f"Episode over: {ended} · return {total:+.3f} over {steps} steps.")
    else:
        typer.echo(f"Stopped before the end · return {total:+.3f} over {steps} steps.")


def _env_kwargs(factory: Any, split: str | None, task: str | None, perturbation: str | None) -> dict[str, Any]:
    """Only the options the user gave; a named task is looked up in every split unless one was chosen."""
    kwargs: dict[str, Any] = {}
    if perturbation:
        kwargs["perturbation"] = perturbation
    if split:
        kwargs["split"] = split
    elif task and "split" in _parameters(factory):
        kwargs["split"] = None
    return kwargs


def _import(module: str) -> None:
    """Import ``module`` (a dotted name, or a path to a .py file) for its side effects (registration)."""
    path = Path(module)
    if path.suffix != ".py":
        importlib.import_module(module)
        return
    if not path.is_file():
        raise FileNotFoundError(f"--module file not found: {path}")
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    assert module_spec is not None and module_spec.loader is not None
    loaded = importlib.util.module_from_spec(module_spec)
    sys.modules[path.stem] = loaded
    module_spec.loader.exec_module(loaded)


def _parameters(factory: Any) -> set[str]:
    try:
        return set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return set()


def _as_action(line: str, accepted: tuple[str, ...]) -> str:
    from agentic_rl.agent.actions import answer, command

    if line.startswith(("<", "```")):
        return line
    if "command" in accepted:
        return command(line)
    if "answer" in accepted:
        return answer(line)
    return line


def _terms(info: dict[str, Any]) -> str:
    terms = info.get("reward_terms") or {}
    return ", ".join(f"{name} {value:+.3f}" for name, value in terms.items()) or "no terms"


def _show_actions(info: dict[str, Any], show: bool) -> None:
    actions = info.get("admissible_actions")
    if show and actions:
        typer.echo("actions: " + " | ".join(actions))


def _hint(env: Any) -> str:
    try:
        return env.expert_action(1.0)
    except NotImplementedError:
        return "(this env has no scripted expert)"
