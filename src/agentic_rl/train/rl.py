"""The RL loop: a reference implementation that reads top to bottom.

Each iteration runs the same numbered stages::

    1. sample tasks      curriculum / uniform sampler, exploration schedule (temperature, ε)
    2. roll out          group_size episodes per task with the batched engine (token ledgers + logprobs);
                         optionally, groups without a success once more from an expert prefix
    3. score             drop zero-variance (and failed) groups, reference logprobs + values, advantages
    4. update            epochs × minibatches optimizer steps, token-budget micro-batches, guards
    5. log               metrics.jsonl / TensorBoard, trajectory samples, curriculum events
    6. evaluate          held-out success every ``eval_every``; keep the best; early stopping
    7. checkpoint        every ``save_every``, at the end, and on any stop (atomic; resumable)

Variants (advantage estimator, policy loss) are registered functions in :mod:`agentic_rl.algos`; this file
never branches on them except to enable the value head for ``gae``.
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agentic_rl.algos import policy_loss
from agentic_rl.config import Config, save_config
from agentic_rl.env.registry import make as make_env
from agentic_rl.env.registry import task_set as env_task_set
from agentic_rl.train import checkpoint as ckpt
from agentic_rl.train.batching import samples_from_trajectories
from agentic_rl.train.curriculum import (
    TaskSampler,
    drop_failed_groups,
    drop_zero_variance,
    failed_group_share,
)
from agentic_rl.train.forward import ValueHead, hidden_size
from agentic_rl.train.guide import guided_retries, unguided
from agentic_rl.train.replay import ReplayBuffer
from agentic_rl.train.sampling import RolloutFn, action_openers, engine_rollout_fn, evaluate_heldout
from agentic_rl.train.schedules import decayed
from agentic_rl.train.scoring import annotate, score
from agentic_rl.train.setup import (
    build_optimizer,
    build_policy,
    build_reference,
    build_scheduler,
    seed_everything,
    split_tasks,
)
from agentic_rl.train.stop import EmergencyStop
from agentic_rl.train.update import clip_and_check, minibatch_indices, nll_loss, policy_step

ProgressFn = Callable[[dict[str, Any]], None]


@dataclass
class RunResult:
    """What a finished (or stopped) run leaves behind."""

    run_dir: Path
    iterations_done: int
    stop_reason: str  # "completed", "early_stop", "stop_file", "signal:SIGTERM", "guard:<kind>"
    best_success: float | None
    best_iteration: int | None
    last_metrics: dict[str, float] = field(default_factory=dict)


def train_rl(config: Config | None = None, *, env: Callable[[], Any] | None = None, rollout_fn: RolloutFn | None = None,
             policy: Any = None, tasks: Any = None, sft_samples: list | None = None, resume: bool = False,
             progress: ProgressFn | None = None, **fields: Any) -> RunResult:
    """Train a policy with RL; every config field can be passed flat (``lr=1e-5, advantage="gae"``).

    ``env``: an env factory to play instead of the registered ``env_id`` (a custom env class);
    ``rollout_fn`` replaces the engine (see :mod:`agentic_rl.train.sampling`); ``policy`` a loaded
    :class:`~agentic_rl.models.policy.Policy` (e.g. after SFT); ``tasks`` a :class:`TaskSet` instead of
    the env's. ``sft_samples``: demonstration samples for ``sft_mix_coef``. ``resume`` continues from
    ``run_dir/checkpoints/last``. ``progress`` is called after every iteration with its metrics.
    """
    cfg = Config.from_flat(config, **fields)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    m, e, r, a, t, c, g = cfg.model, cfg.env, cfg.rollout, cfg.algo, cfg.train, cfg.checkpoint, cfg.guards
    resume_from = ckpt.resume_point(run_dir) if resume else None
    seed_everything(t.seed)

    # -- setup: policy, critic, reference, optimizer, tasks, sampler, logger ------------------------
    if policy is None or resume_from is not None:
        policy = build_policy(m.model_name, lora=m.lora, lora_rank=m.lora_rank, lora_alpha=m.lora_alpha,
                              lora_dropout=m.lora_dropout, trainable_layers=m.trainable_layers, dtype=m.dtype,
                              device=m.device, checkpoint=resume_from)
    model, device, pad_id = policy.model, policy.device, policy.tokenizer.pad_token_id or 0
    model.train()
    value_head = ValueHead(hidden_size(model)).to(device) if a.advantage == "gae" else None
    reference = None
    if a.kl_coef > 0 or g.kl_limit is not None:
        reference = build_reference(policy, m.model_name, resumed=resume_from is not None, dtype=m.dtype, device=m.device)
    params = [p for p in model.parameters() if p.requires_grad]
    params += list(value_head.parameters()) if value_head is not None else []
    optimizer = build_optimizer(params, lr=t.lr, weight_decay=t.weight_decay)
    scheduler = build_scheduler(optimizer, total_steps=t.iterations * t.update_epochs * t.minibatches,
                                warmup_steps=t.warmup_steps, schedule=t.lr_schedule, min_ratio=t.min_lr_ratio)
    all_tasks = tasks if tasks is not None else env_task_set(e.env_id, e.env_kwargs, e.task_file)
    train_tasks, heldout = split_tasks(all_tasks, e.train_split, e.eval_split)
    cur = cfg.curriculum
    sampler = TaskSampler(train_tasks, curriculum=cur.use_curriculum, start_level=cur.start_level,
                          promote_threshold=cur.promote_threshold, demote_threshold=cur.demote_threshold,
                          window=cur.curriculum_window, lower_level_mix=cur.lower_level_mix, seed=t.seed)
    replay = ReplayBuffer(t.replay_capacity, seed=t.seed, max_group_success=t.replay_max_group_success)
    rollout_fn = rollout_fn or engine_rollout_fn(policy, env or e.env_id, e.env_kwargs)
    openers = action_openers(e.env_id, env) if r.explore_kinds > 0 else []
    eval_tasks = list(heldout)[: cfg.eval.eval_tasks] if len(heldout) else list(train_tasks)[: cfg.eval.eval_tasks]
    loss_fn = policy_loss(a.loss)
    loss_kwargs = {"clip_low": a.clip_low, "clip_high": a.clip_high, "aggregation": a.aggregation,
                   "kl_coef": a.kl_coef if a.kl_in == "loss" else 0.0, "kl_estimator": a.kl_estimator,
                   "entropy_coef": a.entropy_coef}
    state = {"iteration": 0, "best_success": None, "best_iteration": None, "evals_since_best": 0}
    if resume_from is not None:
        state.update(ckpt.restore(resume_from, optimizer=optimizer, scheduler=scheduler, value_head=value_head))
        sampler.load_state_dict(state["sampler"])
        replay.load_state_dict(state["replay"])
        _truncate_logs(run_dir, state["iteration"])
    from agentic_rl.monitor import MetricsLogger, trajectory_metrics

    log = MetricsLogger(run_dir, tensorboard=cfg.monitor.tensorboard, wandb=cfg.monitor.wandb,
                        mlflow=cfg.monitor.mlflow, config=cfg.model_dump())
    log.event(state["iteration"], "resume" if resume_from is not None else "start", algo=a.advantage)
    gen = torch.Generator().manual_seed(t.seed)
    if "minibatch_rng" in state:
        gen.set_state(torch.tensor(state["minibatch_rng"], dtype=torch.uint8))
    decay = r.explore_decay_iterations or t.iterations
    stop_reason, metrics = "completed", {}
    iteration = state["iteration"]

    def save(path: Path, next_iteration: int) -> None:
        saved = dict(state, iteration=next_iteration, sampler=sampler.state_dict(), replay=replay.state_dict(),
                     minibatch_rng=gen.get_state().tolist(), global_step=scheduler.last_epoch, algo=a.advantage)
        ckpt.save_checkpoint(path, policy=policy, state=saved, optimizer=optimizer, scheduler=scheduler,
                             value_head=value_head)

    with EmergencyStop(run_dir) as stop:
        while iteration < t.iterations:
            timings: dict[str, float] = {}
            # 1. sample tasks (and this iteration's exploration)
            tick = time.perf_counter()
            temperature = decayed(r.temperature, r.temperature_final, iteration, decay)
            epsilon = decayed(r.epsilon, r.epsilon_final, iteration, decay)
            explore = decayed(r.explore_kinds, r.explore_kinds_final, iteration, decay)
            batch_tasks = sampler.sample(r.tasks_per_iteration, iteration)
            seeds = [t.seed * 1_000_003 + iteration * 10_007 + i for i in range(len(batch_tasks))]
            guide = decayed(r.guide_failed, r.guide_failed_final, iteration, decay)

            # 2. roll out
            model.eval()
            play = functools.partial(rollout_fn, group_size=r.group_size, temperature=temperature, top_p=r.top_p,
                                     max_new_tokens=r.max_new_tokens, greedy=False, max_turns=e.max_turns,
                                     epsilon=epsilon, **({"explore": explore, "openers": openers} if explore else {}))
            trajs = play(batch_tasks, seeds=seeds)
            if guide > 0:  # groups without a success: once more, from an expert's intermediate state
                trajs += guided_retries(play, trajs, batch_tasks, seeds, env or functools.partial(
                    make_env, e.env_id, **e.env_kwargs), guide, random.Random(seeds[0]))
            model.train()
            timings["time/rollout_s"] = time.perf_counter() - tick

            # 3. score: drop groups without signal, reference logprobs / values, advantages
            tick = time.perf_counter()
            own = unguided(trajs)  # the episodes played from the tasks' own starts
            events = sampler.update(own, iteration)
            replay.add(trajs)
            kept = drop_zero_variance(trajs) if t.filter_zero_variance else list(trajs)
            kept = drop_failed_groups(kept) if t.drop_failed_groups else kept
            samples = samples_from_trajectories(kept)
            annotate(samples, model, reference=reference, value_head=value_head, temperature=temperature,
                     token_budget=t.token_budget, pad_token_id=pad_id, device=device)
            if samples:
                score(kept, samples, estimator=a.advantage, gamma=a.gamma, lam=a.lam, norm_std=a.norm_std,
                      credit=a.credit, kl_penalty=a.kl_coef if a.kl_in == "reward" else 0.0,
                      efficiency_coef=a.efficiency_coef)
            aux = samples_from_trajectories(replay.sample(t.replay_samples)) if t.replay_coef else []
            mix = [sft_samples[i] for i in torch.randperm(len(sft_samples), generator=gen)[: t.sft_mix_samples]
                   ] if t.sft_mix_coef and sft_samples else []  # a fresh draw of demonstrations each iteration
            timings["time/score_s"] = time.perf_counter() - tick

            # 4. update: epochs × minibatches optimizer steps (micro-batched, guarded)
            tick = time.perf_counter()
            step_metrics: list[dict[str, float]] = []
            tripped = None
            for _epoch in range(t.update_epochs if samples else 0):
                for step, part in enumerate(minibatch_indices(len(samples), t.minibatches, gen)):
                    result = policy_step(model, [samples[i] for i in part], loss_fn=loss_fn,
                                         loss_kwargs=loss_kwargs, temperature=temperature,
                                         token_budget=t.token_budget, pad_token_id=pad_id, value_head=value_head,
                                         vf_coef=a.vf_coef, value_clip=a.value_clip, kl_limit=g.kl_limit,
                                         halt_on_nan=g.halt_on_nan, device=device)
                    tripped = result.tripped
                    # each optimizer step imitates its own slice of the replayed / SFT samples
                    if tripped is None and aux[step::t.minibatches]:
                        nll_loss(model, aux[step::t.minibatches], token_budget=t.token_budget, pad_token_id=pad_id,
                                 coef=t.replay_coef / t.minibatches, device=device)
                    if tripped is None and mix[step::t.minibatches]:
                        nll_loss(model, mix[step::t.minibatches], token_budget=t.token_budget, pad_token_id=pad_id,
                                 coef=t.sft_mix_coef / t.minibatches, device=device)
                    if tripped is None:
                        norm, tripped = clip_and_check(params, t.max_grad_norm, g.grad_norm_limit, g.halt_on_nan)
                        result.metrics["optim/grad_norm"] = norm
                    if tripped is not None:
                        optimizer.zero_grad(set_to_none=True)
                        break
                    result.metrics["optim/lr"] = scheduler.get_last_lr()[0]
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                    step_metrics.append(result.metrics)
                if tripped is not None:
                    break
            timings["time/update_s"] = time.perf_counter() - tick

            # 5. log
            metrics = trajectory_metrics(own, split="train")  # how the policy does on its own
            metrics.update(_mean_metrics(step_metrics))
            metrics.update(timings)
            metrics.update(sampler.metrics())
            from agentic_rl.evaluate.audit import audit  # the reward-hacking audit, on a sample

            metrics.update(audit(trajs[:16]).metrics)
            metrics.update({"explore/temperature": temperature, "explore/epsilon": epsilon, "explore/kinds": explore,
                            "explore/guide": guide,
                            "explore/guided_episodes": len(trajs) - len(own),
                            "rollout/kept_fraction": len(kept) / max(1, len(trajs)), "replay/size": len(replay),
                            "update/failed_group_share": failed_group_share(kept)})  # doctor watches it
            sampled = sum(tr.num_sampled_tokens for tr in trajs)
            metrics["perf/rollout_tok_s"] = sampled / max(timings["time/rollout_s"], 1e-9)
            trained = sum(len(s) for s in samples) * t.update_epochs
            metrics["perf/train_tok_s"] = trained / max(timings["time/update_s"], 1e-9)
            for ev in events:
                log.event(iteration, ev.pop("event"), **ev)
            if tripped is not None:  # the weights are still the last good ones: save them and halt
                log.log(iteration, metrics)
                log.event(iteration, "guard_trip", reason=tripped)
                save(Path(run_dir) / "checkpoints" / "last", iteration)
                stop_reason = f"guard:{tripped}"
                break
            log.log(iteration, metrics)
            log.log_histogram("reward/episode", [tr.total_reward for tr in trajs], iteration)
            if c.trajectory_samples:
                log.log_trajectories(iteration, trajs, sample=c.trajectory_samples)

            # 6. evaluate on held-out tasks; keep the best; early stopping
            iteration += 1
            evaluate_now = cfg.eval.eval_every and iteration % cfg.eval.eval_every == 0
            is_best = False
            if evaluate_now or iteration == t.iterations:
                tick = time.perf_counter()
                model.eval()
                row, _ = evaluate_heldout(rollout_fn, eval_tasks, seed=cfg.eval.eval_seed,
                                          greedy=cfg.eval.eval_greedy, temperature=temperature, top_p=r.top_p,
                                          max_new_tokens=r.max_new_tokens, max_turns=e.max_turns)
                model.train()
                log.log_eval(iteration, {"split": e.eval_split, "perturbation": None, **row})
                metrics["success/heldout"] = row["success_rate"]
                metrics["time/eval_s"] = time.perf_counter() - tick
                best = state["best_success"]
                is_best = best is None or row["success_rate"] > best
                if is_best:
                    state.update(best_success=row["success_rate"], best_iteration=iteration, evals_since_best=0)
                    log.event(iteration, "best", success=row["success_rate"])
                else:
                    state["evals_since_best"] += 1

            # 7. checkpoint (periodic, best, end) and stops
            patience = cfg.eval.early_stop_patience
            if patience is not None and state["evals_since_best"] >= patience:
                stop_reason = "early_stop"
            stop_reason = stop.requested() or stop_reason
            finishing = iteration == t.iterations or stop_reason != "completed"
            if iteration % c.save_every == 0 or finishing or is_best:
                last = Path(run_dir) / "checkpoints" / "last"
                save(last, iteration)
                if iteration % c.save_every == 0:
                    ckpt.link_checkpoint(last, Path(run_dir) / "checkpoints" / f"iter_{iteration:06d}")
                    ckpt.prune_iterations(Path(run_dir) / "checkpoints", c.keep_checkpoints)
                if is_best:
                    ckpt.link_checkpoint(last, Path(run_dir) / "checkpoints" / "best")
            if progress is not None:
                progress({"iteration": iteration, "iterations": t.iterations, **metrics})
            if stop_reason != "completed":
                break
    log.event(iteration, "stop", reason=stop_reason)
    log.close()
    return RunResult(run_dir, iteration, stop_reason, state["best_success"], state["best_iteration"], metrics)


def _mean_metrics(rows: list[dict[str, float]]) -> dict[str, float]:
    """Per-key mean over the optimizer steps of an iteration."""
    keys = {k for row in rows for k in row}
    return {k: sum(row[k] for row in rows if k in row) / sum(1 for row in rows if k in row) for k in sorted(keys)}


def _truncate_logs(run_dir: Path, start_iteration: int) -> None:
    """On resume, drop metric/eval rows the interrupted run wrote after its last checkpoint."""
    for name in ("metrics.jsonl", "eval.jsonl", "histograms.jsonl"):
        path = run_dir / name
        if not path.exists():
            continue
        kept = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line
            limit = start_iteration if name != "eval.jsonl" else start_iteration + 1
            if int(row.get("iteration", 0)) < limit:
                kept.append(line)
        path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")
