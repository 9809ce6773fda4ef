"""CLI: ``agentic-rl sft`` and ``agentic-rl train`` (registered on the shared Typer app by agentic_rl.cli)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

_OVERRIDES_HELP = "Dotted overrides section.field=value, e.g. train.lr=1e-5 algo.advantage=gae (YAML values)."


def _load(config: Path | None, overrides: list[str], run_dir: str | None) -> Any:
    from agentic_rl.config import ConfigError, load_config

    try:
        cfg = load_config(config, overrides)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config / OVERRIDES") from None
    if run_dir is not None:
        cfg.run_dir = run_dir
    return cfg


def _printer(prefix: str, keys: tuple[str, ...]) -> Any:
    def show(metrics: dict[str, Any]) -> None:
        parts = [f"{k}={metrics[k]:.3g}" for k in keys if isinstance(metrics.get(k), (int, float))]
        typer.echo(f"{prefix} " + " ".join(parts))

    return show


def sft(
    overrides: list[str] = typer.Argument(None, help=_OVERRIDES_HELP),
    config: Path = typer.Option(None, "--config", "-c", help="YAML config (see configs/)."),
    run_dir: str = typer.Option(None, "--run-dir", help="Where to write checkpoints and logs (overrides run_dir)."),
) -> None:
    """Supervised fine-tuning on demonstrations (the env's expert or a JSONL of conversations)."""
    from agentic_rl.train.sft import train_sft

    cfg = _load(config, overrides or [], run_dir)
    result = train_sft(cfg, progress=_printer("[sft]", ("epoch", "loss/sft", "loss/sft_val")))
    typer.echo(f"SFT done ({result.stop_reason}): train loss {result.train_loss:.4f}"
               + (f", val loss {result.val_loss:.4f}" if result.val_loss is not None else "")
               + (f", held-out success {result.heldout_success:.1%}" if result.heldout_success is not None else "")
               + f"\npolicy: {result.run_dir / 'checkpoints' / 'best'}")


def train(
    overrides: list[str] = typer.Argument(None, help=_OVERRIDES_HELP),
    config: Path = typer.Option(None, "--config", "-c", help="YAML config (see configs/)."),
    run_dir: str = typer.Option(None, "--run-dir", help="Where to write checkpoints and logs (overrides run_dir)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from RUN_DIR/checkpoints/last exactly."),
) -> None:
    """RL training (GRPO, RLOO, REINFORCE++, PPO/GAE). Stop safely with Ctrl-C or `touch RUN_DIR/STOP`."""
    from agentic_rl.train.rl import train_rl

    cfg = _load(config, overrides or [], run_dir)
    keys = ("iteration", "reward/mean", "success/train", "success/heldout", "policy/entropy", "policy/kl")
    result = train_rl(cfg, resume=resume, progress=_printer("[train]", keys))
    best = f"{result.best_success:.1%} at iteration {result.best_iteration}" if result.best_success is not None else "n/a"
    typer.echo(f"stopped: {result.stop_reason} after {result.iterations_done} iterations; best held-out success {best}"
               f"\nrun dir: {result.run_dir}")
    if result.stop_reason.startswith("guard:"):
        raise typer.Exit(code=3)


def register(app: typer.Typer) -> None:
    """Add ``sft`` and ``train`` to ``app``."""
    app.command("sft")(sft)
    app.command("train")(train)
