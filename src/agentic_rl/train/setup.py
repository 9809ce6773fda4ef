"""Builders for the trainer's parts. Each takes the few flat arguments it needs (not the whole config)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentic_rl.tasks.core import TaskSet
from agentic_rl.train.schedules import lr_factor


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA) RNGs."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def build_policy(model_name: str, *, lora: bool = False, lora_rank: int = 16, lora_alpha: int = 32,
                 lora_dropout: float = 0.0, trainable_layers: int | None = None, dtype: str = "auto",
                 device: str = "auto", checkpoint: str | Path | None = None) -> Any:
    """The trainable policy: from ``checkpoint`` when resuming, else from ``model_name``.

    LoRA trains an adapter; otherwise full fine-tuning, optionally of the top ``trainable_layers`` blocks.
    """
    from agentic_rl.models.policy import Policy, load_policy

    if checkpoint is not None:
        if lora:
            return Policy.load(checkpoint, dtype=dtype, device=device, is_trainable=True)
        return load_policy(str(checkpoint), dtype=dtype, device=device, trainable_layers=trainable_layers)
    lora_options = {"r": lora_rank, "lora_alpha": lora_alpha, "lora_dropout": lora_dropout} if lora else None
    return load_policy(model_name, lora_options, dtype=dtype, device=device,
                       trainable_layers=None if lora else trainable_layers)


def build_reference(policy: Any, model_name: str, *, resumed: bool, dtype: str = "auto", device: str = "auto") -> Any:
    """The KL reference: the adapter-disabled base for LoRA; otherwise a frozen copy of the *initial*
    weights (reloaded from ``model_name`` when resuming, since the policy has moved)."""
    from agentic_rl.models.policy import load_policy
    from agentic_rl.train.forward import Reference

    if hasattr(policy.model, "disable_adapter") or not resumed:
        return Reference(policy.model)
    initial = load_policy(model_name, dtype=dtype, device=device).model
    return Reference(policy.model, frozen_copy=initial.eval())


def build_optimizer(parameters: list[torch.nn.Parameter], *, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    if not parameters:
        raise ValueError("no trainable parameters: check model.trainable_layers / model.lora")
    # not fused=True: the fused kernel updates weights without bumping tensor versions, and the rollout
    # engine uses those to notice new weights (it would keep sampling from stale ones)
    return torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay)


def build_scheduler(optimizer: torch.optim.Optimizer, *, total_steps: int, warmup_steps: int = 0,
                    schedule: str = "constant", min_ratio: float = 0.1) -> torch.optim.lr_scheduler.LambdaLR:
    def factor(step: int) -> float:
        return lr_factor(step, total_steps=total_steps, warmup_steps=warmup_steps, schedule=schedule,
                         min_ratio=min_ratio)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def split_tasks(tasks: TaskSet, train_split: str, eval_split: str) -> tuple[TaskSet, TaskSet]:
    """(train, held-out) task sets; ValueError naming the splits present when the train split is empty."""
    train = tasks.split(train_split)
    if len(train) == 0:
        raise ValueError(f"{tasks.name}: no tasks in split {train_split!r}; splits present: {tasks.splits()}")
    return train, tasks.split(eval_split)
