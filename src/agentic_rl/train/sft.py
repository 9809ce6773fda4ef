"""Supervised fine-tuning on demonstrations: the warm-up before RL.

Data (``sft_data``):

- ``expert`` — episodes of the env's scripted expert (``collect_demonstrations``) on training tasks,
  at ``expert_skill`` (an imperfect teacher below 1.0);
- a JSONL file of conversations, one per line: ``{"system": "...", "messages": [{"role": "user",
  "content": ...}, {"role": "assistant", "content": ...}, ...]}`` (user and assistant alternate, user
  first); or a trajectory JSONL as written by ``agentic-rl play`` / the rollout (``turns``).

Each demonstration becomes a token ledger (:func:`agentic_rl.agent.prompt.build_ledger`, the same
rendering the rollout engine produces), and the loss is the token-mean NLL of mask-1 tokens only (the
agent's actions and their end-of-turn token; never the prompt or observations). Batches are bucketed by
length and split into token-budget micro-batches with gradient accumulation. After every epoch the
validation loss is logged; at the end, held-out success is measured by rollout (optional).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentic_rl.config import Config, save_config
from agentic_rl.env.registry import task_set as env_task_set
from agentic_rl.rollout.trajectory import Trajectory
from agentic_rl.train import checkpoint as ckpt
from agentic_rl.train.batching import Sample, token_steps
from agentic_rl.train.sampling import RolloutFn, engine_rollout_fn, evaluate_heldout
from agentic_rl.train.setup import (
    build_optimizer,
    build_policy,
    build_scheduler,
    seed_everything,
    split_tasks,
)
from agentic_rl.train.stop import EmergencyStop
from agentic_rl.train.update import nll_loss

#: (system prompt, observations, actions) — one demonstration conversation
Conversation = tuple[str, list[str], list[str]]


@dataclass
class SFTResult:
    run_dir: Path
    policy: Any
    train_loss: float
    val_loss: float | None
    heldout_success: float | None
    stop_reason: str


def conversation_from_messages(raw: dict[str, Any], where: str) -> Conversation:
    """Validate one JSONL conversation object (errors name ``where`` and the field)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("messages"), list) or not raw["messages"]:
        raise ValueError(f"{where}: expected an object with a non-empty 'messages' list")
    system = raw.get("system") or ""
    if not isinstance(system, str):
        raise ValueError(f"{where}: field 'system' must be a string")
    observations, actions = [], []
    for i, message in enumerate(raw["messages"]):
        expected = "user" if i % 2 == 0 else "assistant"
        if not isinstance(message, dict) or message.get("role") != expected or not isinstance(message.get("content"), str):
            raise ValueError(f"{where}: messages[{i}] must be {{'role': '{expected}', 'content': str}}")
        (observations if expected == "user" else actions).append(message["content"])
    if not actions:
        raise ValueError(f"{where}: no assistant message to learn from")
    return system, observations[: len(actions)], actions


def conversation_from_trajectory(traj: Trajectory) -> Conversation:
    return (str(traj.metadata.get("system_prompt", "")), [t.observation for t in traj.turns],
            [t.action for t in traj.turns])


def load_demonstrations(path: str | Path) -> list[Conversation]:
    """Conversations from a JSONL file of conversations or of trajectories."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"SFT data file not found: {path}")
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: invalid JSON ({exc.msg})") from None
        if isinstance(raw, dict) and "turns" in raw:
            out.append(conversation_from_trajectory(Trajectory.from_dict(raw)))
        else:
            out.append(conversation_from_messages(raw, where))
    return out


def demonstration_samples(tokenizer: Any, conversations: Sequence[Conversation]) -> list[Sample]:
    """Token ledgers of demonstrations as training samples (loss mask = the agent's tokens)."""
    from agentic_rl.agent.prompt import build_ledger

    samples = []
    for index, (system, observations, actions) in enumerate(conversations):
        seg = build_ledger(tokenizer, system, observations, actions)
        samples.append(Sample(seg.token_ids, seg.loss_mask, seg.logprobs, token_steps(seg), index))
    return samples


def expert_conversations(env_id: str, env_kwargs: dict[str, Any], tasks: Sequence[Any], *, skill: float,
                         seed: int, max_steps: int) -> list[Conversation]:
    """Demonstrations from the env's scripted expert (successful or not: an imperfect teacher's habits)."""
    from agentic_rl.env.registry import make
    from agentic_rl.envs.experts import collect_demonstrations

    env = make(env_id, **env_kwargs)
    try:
        trajs = collect_demonstrations(env, tasks, skill=skill, seed=seed, max_steps=max_steps, env_id=env_id)
    finally:
        env.close()
    return [conversation_from_trajectory(t) for t in trajs if t.turns]


def _gather(sft_data: str, task_set: Any, *, env_id: str, env_kwargs: dict[str, Any], demos: int, skill: float,
            seed: int, max_steps: int, train_split: str) -> list[Conversation]:
    """The demonstrations ``sft_data`` names: expert episodes on training tasks, or a JSONL file."""
    if sft_data != "expert":
        return load_demonstrations(sft_data)
    train_tasks = task_set.split(train_split)
    if len(train_tasks) == 0:
        raise ValueError(f"{task_set.name}: no tasks in split {train_split!r} to collect expert demonstrations on")
    chosen = train_tasks.sample(demos, random.Random(seed))
    return expert_conversations(env_id, env_kwargs, chosen, skill=skill, seed=seed, max_steps=max_steps)


def _heldout_success(cfg: Config, task_set: Any, rollout_fn: RolloutFn, model: Any, log: Any) -> float:
    """Held-out success of the tuned policy (logged to ``eval.jsonl``)."""
    e, r = cfg.env, cfg.rollout
    _, heldout = split_tasks(task_set, e.train_split, e.eval_split)
    model.eval()
    row, _ = evaluate_heldout(rollout_fn, list(heldout)[: cfg.eval.eval_tasks], seed=cfg.eval.eval_seed,
                              greedy=cfg.eval.eval_greedy, temperature=r.temperature, top_p=r.top_p,
                              max_new_tokens=r.max_new_tokens, max_turns=e.max_turns)
    log.log_eval(cfg.sft.sft_epochs, {"split": e.eval_split, "perturbation": None, "stage": "sft", **row})
    return row["success_rate"]


def _batches(samples: Sequence[Sample], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches (similar lengths together, little padding) in a shuffled order."""
    order = sorted(range(len(samples)), key=lambda i: (len(samples[i]), i))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def train_sft(config: Config | None = None, *, policy: Any = None, conversations: Sequence[Conversation] | None = None,
              tasks: Any = None, rollout_fn: RolloutFn | None = None,
              progress: Callable[[dict[str, Any]], None] | None = None, **fields: Any) -> SFTResult:
    """Fine-tune on demonstrations; every config field can be passed flat (``sft_epochs=3``).

    ``conversations`` overrides ``sft_data``; ``policy`` a loaded policy; ``tasks`` the env's task set;
    ``rollout_fn`` the engine used for held-out success. The tuned policy is saved to
    ``run_dir/checkpoints/last`` (and ``best``: lowest validation loss) and returned.
    """
    cfg = Config.from_flat(config, **fields)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    m, e, s, t = cfg.model, cfg.env, cfg.sft, cfg.train
    seed_everything(t.seed)
    if policy is None:
        policy = build_policy(m.model_name, lora=m.lora, lora_rank=m.lora_rank, lora_alpha=m.lora_alpha,
                              lora_dropout=m.lora_dropout, trainable_layers=m.trainable_layers, dtype=m.dtype,
                              device=m.device)
    model, device, pad_id = policy.model, policy.device, policy.tokenizer.pad_token_id or 0
    task_set = None
    if conversations is None or (s.sft_eval_success and rollout_fn is not None):
        task_set = tasks if tasks is not None else env_task_set(e.env_id, e.env_kwargs, e.task_file)
    if conversations is None:
        conversations = _gather(s.sft_data, task_set, env_id=e.env_id, env_kwargs=e.env_kwargs, demos=s.demos,
                                skill=s.expert_skill, seed=t.seed, max_steps=e.max_turns, train_split=e.train_split)
    samples = demonstration_samples(policy.tokenizer, conversations)
    rng = random.Random(t.seed)
    rng.shuffle(samples)
    n_val = int(len(samples) * s.val_fraction)
    val, train = samples[:n_val], samples[n_val:]
    if not train:
        raise ValueError(f"no SFT training samples ({len(samples)} demonstrations, val_fraction={s.val_fraction})")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(params, lr=s.sft_lr, weight_decay=t.weight_decay)
    steps_per_epoch = -(-len(train) // s.sft_batch_size)
    scheduler = build_scheduler(optimizer, total_steps=s.sft_epochs * steps_per_epoch, warmup_steps=t.warmup_steps,
                                schedule=t.lr_schedule, min_ratio=t.min_lr_ratio)
    from agentic_rl.monitor import MetricsLogger

    log = MetricsLogger(run_dir, tensorboard=cfg.monitor.tensorboard, wandb=cfg.monitor.wandb,
                        mlflow=cfg.monitor.mlflow, config=cfg.model_dump())
    log.event(0, "start", stage="sft", demonstrations=len(samples))
    best_val, train_loss, val_loss, stop_reason = None, float("nan"), None, "completed"
    model.train()
    with EmergencyStop(run_dir) as stop:
        for epoch in range(s.sft_epochs):
            tick = time.perf_counter()
            summed = tokens = 0.0
            for batch in _batches(train, s.sft_batch_size, rng):
                loss_sum, n_tokens = nll_loss(model, [train[i] for i in batch], token_budget=t.token_budget,
                                              pad_token_id=pad_id, device=device)
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, t.max_grad_norm))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                summed, tokens = summed + loss_sum, tokens + n_tokens
                if stop.requested():
                    break
            train_loss = summed / max(tokens, 1)
            metrics = {"loss/sft": train_loss, "optim/lr": scheduler.get_last_lr()[0], "optim/grad_norm": grad_norm,
                       "time/sft_epoch_s": time.perf_counter() - tick}
            if val:
                model.eval()
                v_sum, v_tokens = nll_loss(model, val, token_budget=t.token_budget, pad_token_id=pad_id,
                                           device=device, backward=False)
                model.train()
                val_loss = metrics["loss/sft_val"] = v_sum / max(v_tokens, 1)
            log.log(epoch, metrics)
            if progress is not None:
                progress({"epoch": epoch + 1, "epochs": s.sft_epochs, **metrics})
            last = ckpt.save_checkpoint(run_dir / "checkpoints" / "last", policy=policy,
                                        state={"stage": "sft", "epoch": epoch + 1, "val_loss": val_loss})
            if val_loss is None or best_val is None or val_loss < best_val:
                best_val = val_loss
                ckpt.link_checkpoint(last, run_dir / "checkpoints" / "best")
            if stop.requested():
                stop_reason = stop.requested() or stop_reason
                break
    heldout_success = None
    if s.sft_eval_success and stop_reason == "completed" and task_set is not None:
        rollout_fn = rollout_fn or engine_rollout_fn(policy, e.env_id, e.env_kwargs)
        heldout_success = _heldout_success(cfg, task_set, rollout_fn, model, log)
    log.event(s.sft_epochs, "stop", reason=stop_reason)
    log.close()
    return SFTResult(run_dir, policy, train_loss, val_loss, heldout_success, stop_reason)
