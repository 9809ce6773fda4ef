"""Curriculum promotion/demotion, zero-variance dropping, replay, schedules."""

from __future__ import annotations

import json

from agentic_rl.rollout.trajectory import Segment, Trajectory, Turn
from agentic_rl.tasks.core import Task, TaskSet
from agentic_rl.train.curriculum import (
    TaskSampler,
    drop_failed_groups,
    drop_zero_variance,
    failed_group_share,
)
from agentic_rl.train.replay import ReplayBuffer
from agentic_rl.train.schedules import decayed, lr_factor


def _tasks() -> TaskSet:
    return TaskSet([Task(f"t{lvl}-{i}", "p", {}, difficulty=lvl) for lvl in range(3) for i in range(4)])


def _episodes(tasks, successes, group="g"):
    return [Trajectory(t.id, turns=[Turn("o", "a", reward=float(s))], success=s, difficulty=t.difficulty,
                       group=f"{group}{i}") for i, (t, s) in enumerate(zip(tasks, successes, strict=True))]


def test_curriculum_starts_easy_promotes_and_demotes():
    sampler = TaskSampler(_tasks(), curriculum=True, window=4, promote_threshold=0.75, demote_threshold=0.25,
                          lower_level_mix=0.0)
    assert {t.difficulty for t in sampler.sample(8)} == {0}
    assert sampler.update(_episodes(sampler.sample(4), [True, True, True, False])) == [
        {"event": "promotion", "from_level": 0, "to_level": 1, "success": 0.75}]
    assert {t.difficulty for t in sampler.sample(8)} == {1}
    assert sampler.metrics()["curriculum/level"] == 1.0
    events = sampler.update(_episodes(sampler.sample(4), [False, False, False, True]))
    assert events[0]["event"] == "demotion" and sampler.level == 0


def test_curriculum_without_demotion_stays_at_a_hard_level():
    sampler = TaskSampler(_tasks(), curriculum=True, window=4, promote_threshold=0.75, demote_threshold=None,
                          lower_level_mix=0.0)
    sampler.update(_episodes(sampler.sample(4), [True] * 4))
    assert sampler.update(_episodes(sampler.sample(4), [False] * 4)) == [] and sampler.level == 1


def test_lower_level_mix_keeps_practising_easier_levels():
    sampler = TaskSampler(_tasks(), curriculum=True, start_level=2, lower_level_mix=0.5, seed=1)
    levels = [t.difficulty for _ in range(20) for t in sampler.sample(10)]
    assert 0.3 < sum(1 for lvl in levels if lvl < 2) / len(levels) < 0.7
    assert 0 < sampler.metrics()["curriculum/mix_level_2"] < 1


def test_zero_variance_groups_are_dropped_and_their_tasks_skipped():
    tasks = list(_tasks())[:2]
    flat = [Trajectory("t0-0", turns=[Turn("o", "a", reward=1.0)], group="a") for _ in range(3)]
    mixed = [Trajectory("t0-1", turns=[Turn("o", "a", reward=r)], group="b") for r in (0.0, 1.0)]
    assert drop_zero_variance(flat + mixed) == mixed
    sampler = TaskSampler(TaskSet(tasks), zero_variance_patience=2, zero_variance_cooldown=3)
    sampler.update(flat + mixed, iteration=0)
    sampler.update(flat + mixed, iteration=1)
    assert {t.id for t in sampler.sample(5, iteration=2)} == {"t0-1"}
    assert "t0-0" in {t.id for t in sampler.sample(5, iteration=5)}  # back after the cooldown


def test_groups_without_a_success_are_dropped_even_with_reward_spread():
    # all fail, but a cheap wrong answer (0.0) beats a tool call that failed (-0.15): no signal to keep
    failed = [Trajectory("t0-0", turns=[Turn("o", "a", reward=r)], group="a") for r in (0.0, -0.15)]
    mixed = [Trajectory("t0-1", turns=[Turn("o", "a", reward=r)], success=r > 0, group="b") for r in (0.0, 1.0)]
    loose = Trajectory("t0-2", turns=[Turn("o", "a", reward=0.0)])
    assert drop_failed_groups(failed + mixed + [loose]) == [*mixed, loose]
    assert failed_group_share(failed + mixed + [loose]) == 0.5  # one of the two groups; ungrouped aside


def test_sampler_state_round_trips_through_json():
    a = TaskSampler(_tasks(), curriculum=True, window=4, seed=5)
    a.update(_episodes(a.sample(4), [True] * 4))
    clone = TaskSampler(_tasks(), curriculum=True, window=4, seed=0)
    clone.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert [t.id for t in clone.sample(6)] == [t.id for t in a.sample(6)]


def test_replay_keeps_recent_successes_with_a_ledger():
    buffer = ReplayBuffer(capacity=2, seed=0)
    seg = Segment([1, 2], [0, 1], [0.0, -1.0])
    won = [Trajectory(f"w{i}", segments=[seg], success=True) for i in range(3)]
    lost = Trajectory("l", segments=[seg], success=False)
    assert buffer.add([*won, lost]) == 3
    assert [t.task_id for t in buffer.items] == ["w1", "w2"]
    restored = ReplayBuffer(2)
    restored.load_state_dict(json.loads(json.dumps(buffer.state_dict())))
    assert [t.task_id for t in restored.sample(2)] == [t.task_id for t in buffer.sample(2)]


def test_replay_can_keep_only_rare_successes():
    seg = Segment([1, 2], [0, 1], [0.0, -1.0])

    def group(name: str, wins: int, size: int = 4) -> list[Trajectory]:
        return [Trajectory(f"{name}{i}", segments=[seg], success=i < wins, group=name) for i in range(size)]

    buffer = ReplayBuffer(capacity=8, max_group_success=0.25)
    # one success in four is a skill being found; three in four is one the policy already has
    assert buffer.add(group("rare", 1) + group("common", 3)) == 1
    assert [t.task_id for t in buffer.items] == ["rare0"]
    assert ReplayBuffer(capacity=8).add(group("rare", 1) + group("common", 3)) == 4  # default: every success


def test_schedules():
    assert [round(lr_factor(s, total_steps=10, warmup_steps=4), 2) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert lr_factor(10, total_steps=10, schedule="cosine", min_ratio=0.1) == 0.1
    assert abs(lr_factor(5, total_steps=10, schedule="linear", min_ratio=0.0) - 0.5) < 1e-9
    assert decayed(1.0, 0.5, 5, 10) == 0.75 and decayed(1.0, 0.5, 50, 10) == 0.5 and decayed(0.3, None, 5, 10) == 0.3
