"""Checkpoints: atomic, complete, resumable.

A checkpoint directory holds the policy as :meth:`Policy.save` writes it (full weights or the LoRA
adapter, plus the tokenizer: loadable with ``Policy.load(dir)``), and for resuming:
``value_head.pt``, ``optimizer.pt``, ``scheduler.pt``, ``rng.pt`` (python, numpy and torch RNG states)
and ``trainer_state.json`` (iteration to run next, optimizer step, best held-out success, sampler /
curriculum / replay state — whatever the trainer passes).

Writes are atomic: everything goes into a temporary sibling directory which is then renamed into place,
so a run killed mid-save leaves the previous checkpoint intact. ``checkpoints/last`` is the newest,
``checkpoints/best`` the best by held-out success, ``checkpoints/iter_000010`` the periodic ones
(hard links where the file system allows, so ``best``/``last`` cost no extra disk).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

STATE_FILE = "trainer_state.json"


def rng_state() -> dict[str, Any]:
    """The python, numpy and torch (CPU and CUDA) RNG states."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _replace_dir(tmp: Path, target: Path) -> None:
    """Move ``tmp`` to ``target``; an existing ``target`` is swapped out first, then deleted."""
    old = target.with_name(f".old-{target.name}-{os.getpid()}")
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


def save_checkpoint(path: str | Path, *, policy: Any, state: dict[str, Any], optimizer: torch.optim.Optimizer | None = None,
                    scheduler: Any = None, value_head: nn.Module | None = None) -> Path:
    """Write a complete checkpoint atomically to ``path`` and return it.

    ``policy`` has ``save(dir)`` (a :class:`~agentic_rl.models.policy.Policy`); ``state`` must be
    JSON-serialisable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    policy.save(tmp)
    if value_head is not None:
        torch.save(value_head.state_dict(), tmp / "value_head.pt")
    if optimizer is not None:
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    if scheduler is not None:
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1, default=str), encoding="utf-8")
    _replace_dir(tmp, path)
    return path


def link_checkpoint(source: str | Path, target: str | Path) -> Path:
    """Atomically make ``target`` a copy of checkpoint ``source`` (hard links when possible)."""
    source, target = Path(source), Path(target)
    tmp = target.with_name(f".tmp-{target.name}-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, tmp, copy_function=link)
    _replace_dir(tmp, target)
    return target


def read_state(path: str | Path) -> dict[str, Any]:
    """The ``trainer_state.json`` of a checkpoint (FileNotFoundError naming the path when absent)."""
    file = Path(path) / STATE_FILE
    if not file.exists():
        raise FileNotFoundError(f"{path} is not a training checkpoint (no {STATE_FILE})")
    return json.loads(file.read_text(encoding="utf-8"))


def restore(path: str | Path, *, optimizer: torch.optim.Optimizer | None = None, scheduler: Any = None,
            value_head: nn.Module | None = None, restore_rng: bool = True) -> dict[str, Any]:
    """Load optimizer / scheduler / value head / RNG states from a checkpoint (the policy weights are
    loaded by ``Policy.load``); return its trainer state."""
    path = Path(path)
    if value_head is not None and (path / "value_head.pt").exists():
        value_head.load_state_dict(torch.load(path / "value_head.pt", weights_only=True))
    if optimizer is not None and (path / "optimizer.pt").exists():
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=False))
    if scheduler is not None and (path / "scheduler.pt").exists():
        scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    if restore_rng and (path / "rng.pt").exists():
        set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    return read_state(path)


def prune_iterations(checkpoint_dir: str | Path, keep: int) -> None:
    """Delete all but the newest ``keep`` ``iter_*`` checkpoints."""
    found = sorted(p for p in Path(checkpoint_dir).glob("iter_*") if p.is_dir())
    for old in found[: max(0, len(found) - keep)]:
        shutil.rmtree(old, ignore_errors=True)


def resume_point(run_dir: str | Path) -> Path | None:
    """``run_dir/checkpoints/last`` when it is a complete checkpoint, else None."""
    last = Path(run_dir) / "checkpoints" / "last"
    return last if (last / STATE_FILE).exists() else None
