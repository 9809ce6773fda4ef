"""GRPO step time: agentic-rl's trainer vs TRL's ``GRPOTrainer`` on an identical single-turn config.

Same model (SmolLM2-135M, full fine-tuning, fp32 on CPU), same chat prompts, group size, max completion
tokens, learning rate, one optimizer update per step, no KL term, same reward function (completion
length close to 12 words). Both run in this process; we report seconds per step (setup excluded) and
the mean reward of the last step. Needs the ``bench`` extra (``pip install -e .[bench]``).

A third row is the step's **floor** on this machine, measured in the same run: generation takes as many
sequential decode steps as the longest completion (at least the mean length), and each step reads every fp32 weight from memory
once (540 MB ≫ the CPU cache) at the copy bandwidth measured here; training then needs ``6·N`` FLOPs per
trained token (each prompt once, plus ``2·N`` per prompt token to prefill it) at the fp32 matmul rate
measured here. TRL's step time over this floor is the largest speed-up any implementation of this
config could show on this machine.

    python benchmarks/grpo_vs_trl.py            # 4 steps each
    python benchmarks/grpo_vs_trl.py --quick    # 2 steps each (< 3 minutes on 2 CPU cores)
"""

from __future__ import annotations

import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from rollout import _matmul_gflops  # noqa: E402  (one matmul-rate probe for every benchmark)

PROMPTS = [f"Describe object number {i} in one sentence." for i in range(8)]
GROUP_SIZE = 4
PROMPTS_PER_STEP = 2
MAX_TOKENS = 32
LR = 1e-5


def length_reward(text: str) -> float:
    """1 for a 12-word answer, falling linearly to 0 at 0 or 24 words."""
    return max(0.0, 1.0 - abs(len(text.split()) - 12) / 12)


def _ours(steps: int) -> dict[str, float]:
    from agentic_rl.env.core import Env
    from agentic_rl.models.policy import load_policy
    from agentic_rl.tasks.core import Task, TaskSet
    from agentic_rl.train import train_rl

    class PromptEnv(Env):  # single turn: the raw completion is scored, as in TRL
        def _reset(self, task: Task | None) -> tuple[str, dict]:
            return task.prompt, {}

        def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
            reward = length_reward(action)
            return "", reward, True, False, {"success": reward > 0.9, "reward_terms": {"outcome": reward}}

    tasks = TaskSet([Task(f"p{i}", p) for i, p in enumerate(PROMPTS)])
    policy = load_policy("smollm2-135m")
    step_times: list[float] = []
    rewards: list[float] = []
    completion_tokens: list[float] = []

    def progress(metrics: dict[str, Any]) -> None:
        step_times.append(metrics["time/rollout_s"] + metrics["time/score_s"] + metrics["time/update_s"])
        rewards.append(metrics["reward/mean"])
        completion_tokens.append(metrics["rollout/response_tokens"])

    with tempfile.TemporaryDirectory() as run_dir, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train_rl(policy=policy, env=PromptEnv, tasks=tasks, run_dir=run_dir, iterations=steps, lr=LR,
                 group_size=GROUP_SIZE, tasks_per_iteration=PROMPTS_PER_STEP, max_new_tokens=MAX_TOKENS,
                 max_turns=1, filter_zero_variance=False, eval_every=0, eval_tasks=1, save_every=10_000,
                 tensorboard=False, trajectory_samples=0, progress=progress, eval_split="train")
    prompt_tokens = [len(policy.tokenizer.apply_chat_template([{"role": "user", "content": p}],
                                                              add_generation_prompt=True, tokenize=True))
                     for p in PROMPTS[:PROMPTS_PER_STEP]]
    n_params = sum(p.numel() for p in policy.model.parameters())  # tied LM head counted once, as a matmul
    weight_bytes = sum(p.numel() * p.element_size() for p in policy.model.parameters())
    mean_completion = sum(completion_tokens) / len(completion_tokens)
    trained = sum(prompt_tokens) + GROUP_SIZE * PROMPTS_PER_STEP * mean_completion
    decode_floor = mean_completion * weight_bytes / (_copy_bandwidth() * 1e9)
    compute_floor = (2 * n_params * sum(prompt_tokens) + 6 * n_params * trained) / (_matmul_gflops() * 1e9)
    return {"s_per_step": sum(step_times) / len(step_times), "reward": rewards[-1],
            "floor_s": decode_floor + compute_floor}


def _copy_bandwidth() -> float:
    """GB/s moved (read + write) by copying a 256 MB tensor, best of 5."""
    import torch

    source = torch.ones(64 * 2**20)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.numel() * source.element_size() / best / 1e9


def _trl(steps: int) -> dict[str, float]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from agentic_rl.models.policy import load_policy

    policy = load_policy("smollm2-135m")
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS]})

    def reward_fn(completions: list, **kwargs: Any) -> list[float]:
        return [length_reward(c[-1]["content"] if isinstance(c, list) else c) for c in completions]

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.start = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.times.append(time.perf_counter() - self.start)

    timer = Timer()
    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = GRPOConfig(output_dir=out, per_device_train_batch_size=PROMPTS_PER_STEP * GROUP_SIZE,
                            num_generations=GROUP_SIZE, max_completion_length=MAX_TOKENS, learning_rate=LR,
                            max_steps=steps, num_iterations=1, gradient_accumulation_steps=1, beta=0.0,
                            use_cpu=True, bf16=False, report_to=[], logging_steps=1, save_strategy="no",
                            temperature=1.0, disable_tqdm=True)
        trainer = GRPOTrainer(model=policy.model, reward_funcs=reward_fn, args=config, train_dataset=data,
                              processing_class=policy.tokenizer, callbacks=[timer])
        trainer.train()
        rewards = [row["reward"] for row in trainer.state.log_history if "reward" in row]
    return {"s_per_step": sum(timer.times) / len(timer.times), "reward": rewards[-1] if rewards else float("nan")}


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Rows ``{"name", "value", "baseline", "ratio", "unit"}`` (ratio > 1: ours is faster / better)."""
    steps = 2 if quick else 4
    ours = _ours(steps)
    trl = _trl(steps)
    return [
        {"name": "grpo_step_time_vs_trl", "value": ours["s_per_step"], "baseline": trl["s_per_step"],
         "ratio": trl["s_per_step"] / ours["s_per_step"], "unit": "s/step (ratio = TRL / ours)", "goal": ">= 5"},
        {"name": f"grpo_reward_after_{steps}_steps_vs_trl", "value": ours["reward"], "baseline": trl["reward"],
         "ratio": ours["reward"] / trl["reward"] if trl["reward"] else float("nan"), "unit": "mean reward"},
        {"name": "grpo_step_floor_vs_trl", "value": ours["floor_s"], "baseline": trl["s_per_step"],
         "ratio": trl["s_per_step"] / ours["floor_s"],
         "unit": "s/step (ratio = TRL / floor: the most any implementation could gain here)",
         "note": "floor = decode steps × weight bytes / copy bandwidth + training FLOPs / matmul rate"},
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(f"{row['name']}: ours {row['value']:.3f} vs TRL {row['baseline']:.3f} {row['unit']} "
              f"-> ratio {row['ratio']:.2f}")
