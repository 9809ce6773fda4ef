"""Expert-prefix guidance: which tasks get a prefix, how long it is, and that it replays in the env."""

from __future__ import annotations

import json
import random

import pytest
from toy import LetterEnv

from agentic_rl.env.registry import make
from agentic_rl.envs.tool_use_tasks import generate_tasks
from agentic_rl.train.guide import expert_prefixes, guided_retries, unguided


@pytest.fixture(scope="module")
def tasks():
    generated = generate_tasks(seed=3, n_per_family=15, families=("direct", "lookup", "lookup_calc"))
    return list(generated.split("train"))


def test_multi_step_tasks_get_a_strict_prefix_of_the_expert(tasks):
    seeds = list(range(len(tasks)))
    prefixes = expert_prefixes(lambda: make("tool-use-v0"), tasks, seeds, random.Random(0))
    lengths = {}
    for task, seed, prefix in zip(tasks, seeds, prefixes, strict=True):
        family = task.data["family"]
        needed = len(task.data["needed"])  # the expert's episode: the needed calls, then the answer
        if family == "direct":
            assert prefix == []  # one action: nothing would be left to the policy
            continue
        assert 1 <= len(prefix) <= needed and '"name": "lookup"' in prefix[0]
        lengths.setdefault(family, set()).add(len(prefix))
        env = make("tool-use-v0")
        env.reset(seed=seed, options={"task": task})
        for action in prefix:  # the prefix replays from the same start without ending the episode
            _, _, terminated, truncated, info = env.step(action)
            assert not (terminated or truncated) and "error" not in info
    assert lengths["lookup"] == {1} and lengths["lookup_calc"] == {1, 2}


def _groups(tasks, successes):
    from agentic_rl.rollout.trajectory import Trajectory

    return [Trajectory(t.id, "tool-use-v0", [], success=ok, group=f"{i}:{t.id}")
            for i, (t, row) in enumerate(zip(tasks, successes, strict=True)) for ok in row]


def test_only_groups_without_a_success_are_replayed_guided(tasks):
    picked = [next(t for t in tasks if t.data["family"] == f) for f in ("lookup_calc", "lookup", "direct")]
    trajs = _groups(picked * 2, [[False, False], [False, False], [False, False], [True, False], [False, True],
                                 [True, True]])
    calls = []

    def play(play_tasks, *, seeds, prefixes):
        calls.append((play_tasks, seeds, prefixes))
        return _groups(play_tasks, [[False, True]] * len(play_tasks))

    retried = guided_retries(play, trajs, picked * 2, [10, 11, 12, 13, 14, 15], lambda: make("tool-use-v0"), 1.0,
                             random.Random(0))
    (played, seeds, prefixes), = calls
    # the failed direct group has a one-action expert: nothing to guide; groups with a success are left alone
    assert [t.id for t in played] == [picked[0].id, picked[1].id] and seeds == [10, 11]
    assert all(p and '"name": "lookup"' in p[0] for p in prefixes)
    assert len(retried) == 4 and all(t.group.startswith("guided/") for t in retried)
    assert guided_retries(play, trajs, picked * 2, list(range(6)), lambda: make("tool-use-v0"), 0.0,
                          random.Random(0)) == [] and len(calls) == 1


def test_an_env_without_an_expert_is_refused_with_the_setting_named(tasks):
    with pytest.raises(ValueError, match="guide_failed"):
        expert_prefixes(LetterEnv, tasks[:2], [0, 1], random.Random(0))


def test_unguided_keeps_the_policys_own_episodes():
    from agentic_rl.rollout.trajectory import Trajectory

    trajs = [Trajectory("a", "e", [], metadata={"guided_turns": 2}), Trajectory("b", "e", []),
             Trajectory("c", "e", [], metadata={"guided_turns": 0})]
    assert [t.task_id for t in unguided(trajs)] == ["b", "c"]


def test_the_rl_loop_replays_failed_groups_guided_and_keeps_them_out_of_its_success(tiny_policy, tmp_path, tasks):
    from agentic_rl.tasks.core import TaskSet
    from agentic_rl.train import train_rl

    lookups = TaskSet([t for t in tasks if t.data["family"] == "lookup_calc"], name="lc")
    seen = []

    def progress(metrics):
        seen.append(metrics)

    train_rl(policy=tiny_policy, tasks=lookups, run_dir=str(tmp_path), env_id="tool-use-v0", iterations=1,
             tasks_per_iteration=2, group_size=2, max_new_tokens=4, max_turns=3, eval_every=0, eval_tasks=1,
             guide_failed=1.0, drop_failed_groups=True, tensorboard=False, progress=progress)
    metrics = seen[0]
    # a random tiny model fails every group: each is played again after one or two expert actions
    assert metrics["explore/guided_episodes"] == 4 and metrics["success/train"] == 0.0
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["explore/guided_episodes"] == 4
