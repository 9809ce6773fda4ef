"""Rollout engine vs HF ``generate``, and training fwd+bwd vs the 6·N·tokens roofline.

One process, one model (the embedded SmolLM2-135M, fp32 on CPU), the same tool-use episodes (same
tasks, same reset seeds, greedy decoding so both sides do the same work):

- **ours**: :func:`agentic_rl.rollout.rollout` with :class:`~agentic_rl.rollout.RolloutEngine`
  (persistent per-episode KV cache, ragged batching, async env steps). The timed region includes a
  forced weight re-read, as after every training step.
- **baseline**: per turn, render every live episode's full conversation, left-pad, one batched HF
  ``model.generate`` (KV cache within the call, ``stop_strings``), then step the envs.

Generated tokens are the policy's tokens up to and including its end-of-turn token.
Training: ``sequence_logprobs`` + backward on full sequences vs ``6 · N · tokens`` at the fp32 matmul
rate measured here (N = parameters that take part in matmuls; attention FLOPs not counted).

Run: ``python benchmarks/rollout.py [--quick]``.
"""

from __future__ import annotations

import sys
import time

import torch

from agentic_rl.agent.actions import STOP_STRINGS
from agentic_rl.env.registry import make
from agentic_rl.envs.tool_use_tasks import generate_tasks
from agentic_rl.models import load_policy, sequence_logprobs
from agentic_rl.rollout import RolloutEngine, SamplingParams, rollout

EPISODES = 32


def _tasks(n: int) -> list:
    return list(generate_tasks(seed=0, n_per_family=12).split("train"))[:n]


def _ours(policy, tasks, seeds, max_turns: int, max_new: int) -> tuple[int, float]:
    engine = RolloutEngine(policy, max_context=2048, max_batch=EPISODES)
    start = time.perf_counter()
    engine.decoder.sync(force=True)
    trajs = rollout(engine, "tool-use-v0", tasks, seeds=seeds, max_turns=max_turns,
                    sampling=SamplingParams(greedy=True, max_new_tokens=max_new))
    elapsed = time.perf_counter() - start
    return sum(len(t.token_ids) for traj in trajs for t in traj.turns), elapsed


def _baseline(policy, tasks, seeds, max_turns: int, max_new: int) -> tuple[int, float]:
    tok, model = policy.tokenizer, policy.model
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    start = time.perf_counter()
    envs, convs = [], []
    for task, seed in zip(tasks, seeds, strict=True):
        env = make("tool-use-v0", passive_check=False)
        obs, _ = env.reset(seed=seed, options={"task": task})
        envs.append(env)
        convs.append([{"role": "system", "content": env.unwrapped.system_prompt()}, {"role": "user", "content": obs}])
    live, generated = list(range(len(tasks))), 0
    for _ in range(max_turns):
        if not live:
            break
        texts = [tok.apply_chat_template(convs[i], tokenize=False, add_generation_prompt=True) for i in live]
        enc = tok(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=max_new, do_sample=False, stop_strings=list(STOP_STRINGS),
                                 tokenizer=tok, pad_token_id=tok.pad_token_id)
        still = []
        for row, i in enumerate(live):
            new = out[row, enc["input_ids"].shape[1]:].tolist()
            cut = new.index(eot) if eot in new else len(new)
            text = tok.decode(new[:cut])
            generated += cut + (1 if cut < len(new) and not any(s in text for s in STOP_STRINGS) else 0)
            obs, _, terminated, truncated, _ = envs[i].step(text)
            convs[i] += [{"role": "assistant", "content": text}, {"role": "user", "content": obs}]
            if not (terminated or truncated):
                still.append(i)
        live = still
    return generated, time.perf_counter() - start


def _matmul_gflops() -> float:
    """The fp32 matmul rate here: best of 5 products of 2048² matrices (1024² ones gave outliers of 2×
    the sustained rate on this shared machine)."""
    size = 2048
    a = torch.randn(size, size)
    a @ a  # warm-up
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def _train_tok_s(policy, batch: int, seq: int, reps: int) -> float:
    model = policy.model
    model.train()
    ids = torch.randint(3, 40000, (batch, seq))
    best = float("inf")
    for _ in range(reps + 1):  # the first repetition warms up
        start = time.perf_counter()
        logprobs, _ = sequence_logprobs(model, ids, with_entropy=False)
        (-logprobs.sum()).backward()
        model.zero_grad(set_to_none=True)
        best = min(best, time.perf_counter() - start)
    model.eval()
    return batch * seq / best


def run(quick: bool = False) -> list[dict]:
    policy = load_policy("smollm2-135m")
    policy.model.eval()
    tasks = _tasks(EPISODES)
    seeds = list(range(len(tasks)))
    max_turns, max_new = (2, 48) if quick else (4, 64)
    base_tokens, base_s = _baseline(policy, tasks, seeds, max_turns, max_new)
    our_tokens, our_s = _ours(policy, tasks, seeds, max_turns, max_new)
    rows = [
        {"name": f"rollout tok/s, {EPISODES} episodes (vs HF generate per turn)", "value": our_tokens / our_s,
         "baseline": base_tokens / base_s, "unit": "tok/s", "goal": ">= 2.5"},
        {"name": f"rollout episodes/s, {EPISODES} episodes (vs HF generate per turn)", "value": len(tasks) / our_s,
         "baseline": len(tasks) / base_s, "unit": "episodes/s"},
    ]
    gflops = _matmul_gflops()
    n_params = sum(p.numel() for p in policy.model.parameters())  # tied LM head counted once, as a matmul
    roofline = gflops * 1e9 / (6 * n_params)
    train = _train_tok_s(policy, batch=2 if quick else 4, seq=256, reps=1 if quick else 2)
    rows.append({"name": "train fwd+bwd tok/s (vs 6*N*tokens roofline at measured matmul rate)", "value": train,
                 "baseline": roofline, "unit": "tok/s", "goal": ">= 0.8"})
    for row in rows:
        row["ratio"] = row["value"] / row["baseline"]
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(f"{r['name']}: {r['value']:.2f} {r['unit']} vs {r['baseline']:.2f} -> {r['ratio']:.2f}x")
