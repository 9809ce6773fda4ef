"""A trivially learnable single-turn env and a tiny HF-sampling rollout function for trainer tests.

The env asks for a word containing the letter ``e`` and pays 1.0 when the reply contains one. A random
tiny model writes such a token about a third of the time (chance); RL must push that towards 100 %.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agentic_rl.agent.prompt import build_ledger
from agentic_rl.env.core import Env
from agentic_rl.rollout.trajectory import Trajectory, Turn
from agentic_rl.tasks.core import Task, TaskSet

SYSTEM = "Reply with one word."


def letter_tasks(n_train: int = 8, n_test: int = 8) -> TaskSet:
    rows = [Task(f"e-{i}", f"Write a word containing the letter e (#{i}).", {}, difficulty=i % 2,
                 split="train" if i < n_train else "test") for i in range(n_train + n_test)]
    return TaskSet(rows, name="letter-e")


class LetterEnv(Env):
    """Single turn: reward 1 when the raw reply contains an ``e`` (the raw text is judged, no grammar)."""

    def __init__(self, tasks: TaskSet | None = None, **kwargs: Any):
        super().__init__(tasks or letter_tasks(), **kwargs)

    def _reset(self, task: Task | None) -> tuple[str, dict]:
        return task.prompt, {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self.steps += 1
        success = "e" in action.lower()
        reward = 1.0 if success else 0.0
        return "done", reward, True, False, {"success": success, "reward_terms": {"outcome": reward},
                                              "action_kind": "answer"}


@torch.no_grad()
def _sample(model: Any, prompt_ids: list[int], n: int, *, temperature: float, greedy: bool,
            max_new_tokens: int, stop_ids: set[int]) -> tuple[list[list[int]], list[list[float]]]:
    """``n`` continuations of one prompt (no KV cache: the tiny model makes that cheap)."""
    ids = torch.tensor([prompt_ids] * n)
    out_ids: list[list[int]] = [[] for _ in range(n)]
    out_lp: list[list[float]] = [[] for _ in range(n)]
    alive = [True] * n
    for _ in range(max_new_tokens):
        logits = model(input_ids=ids, logits_to_keep=1).logits[:, -1].float() / temperature
        logp = torch.log_softmax(logits, -1)
        nxt = logp.argmax(-1) if greedy else torch.multinomial(logp.exp(), 1).squeeze(-1)
        for i in range(n):
            if alive[i]:
                out_ids[i].append(int(nxt[i]))
                out_lp[i].append(float(logp[i, nxt[i]]))
                alive[i] = int(nxt[i]) not in stop_ids
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        if not any(alive):
            break
    return out_ids, out_lp


def make_rollout_fn(policy: Any, env_factory: Any = LetterEnv):
    """A RolloutFn (see agentic_rl.train.sampling) for single-turn envs."""
    from agentic_rl.agent.prompt import chat_format

    tokenizer = policy.tokenizer
    fmt = chat_format(tokenizer)

    def run(tasks: Sequence[Task], *, group_size: int, seeds: Sequence[int], temperature: float, top_p: float,
            max_new_tokens: int, greedy: bool, max_turns: int, epsilon: float) -> list[Trajectory]:
        trajs = []
        for ti, task in enumerate(tasks):
            env = env_factory()
            obs, _ = env.reset(seed=seeds[ti], options={"task": task})
            prompt = fmt.prompt_ids(SYSTEM, obs)
            all_ids, all_lp = _sample(policy.model, prompt, group_size, temperature=temperature, greedy=greedy,
                                      max_new_tokens=max_new_tokens, stop_ids=fmt.stop_ids)
            for ids, lps in zip(all_ids, all_lp, strict=True):
                text = fmt.decode([i for i in ids if i not in fmt.stop_ids])
                env.reset(seed=seeds[ti], options={"task": task})
                _, reward, term, trunc, info = env.step(text)
                seg = build_ledger(tokenizer, SYSTEM, [obs], [text], sampled_ids=[ids])
                _, start, end = seg.turn_spans[0]
                seg.logprobs[start:end] = lps
                trajs.append(Trajectory(task.id, "letter-e", [Turn(obs, text, ids, lps, reward, info["reward_terms"],
                                                                    term, trunc, info=info)], [seg],
                                        termination="success" if info["success"] else "failed",
                                        success=info["success"], difficulty=task.difficulty,
                                        group=f"{seeds[ti]}-{ti}", seed=seeds[ti]))
        return trajs

    return run


#: settings shared by trainer tests: one sampled token per episode, a fast tiny run
FAST = dict(max_new_tokens=1, group_size=8, tasks_per_iteration=4, max_turns=1, eval_tasks=8,
            eval_greedy=False, tensorboard=False, trajectory_samples=2)
