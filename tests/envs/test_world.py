import json
import random
import warnings

import pytest

from agentic_rl.agent.actions import command
from agentic_rl.env import checker
from agentic_rl.env.registry import make
from agentic_rl.envs.experts import play_expert
from agentic_rl.envs.world import GridWorldEnv, generate_tasks
from agentic_rl.envs.world_maps import parse_layout
from agentic_rl.tasks.core import TaskFileError, TaskSet

COMMANDS = ["go north", "go south", "go east", "go west", "pick up key", "open door"]


def success_by_level(env, policy_skill=None, rng_seed=0):
    """Success rate per level over env.tasks: the expert at ``policy_skill``, or uniform random commands."""
    by_level = {}
    rng = random.Random(rng_seed)
    for i, task in enumerate(env.tasks):
        if policy_skill is not None:
            ok = play_expert(env, task, skill=policy_skill, seed=i, max_steps=500).success
        else:
            env.reset(seed=i, options={"task": task})
            while True:
                _, _, terminated, truncated, info = env.step(command(rng.choice(COMMANDS)))
                if terminated or truncated:
                    break
            ok = info["success"]
        by_level.setdefault(task.difficulty, []).append(ok)
    return {level: sum(v) / len(v) for level, v in sorted(by_level.items())}


def test_tasks_levels_splits_and_determinism():
    tasks = generate_tasks.__wrapped__(0)  # bypass the cache: really generate twice
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in generate_tasks.__wrapped__(0)]
    assert [t.data["grid"] for t in generate_tasks.__wrapped__(1)] != [t.data["grid"] for t in tasks]
    assert tasks.levels() == [0, 1, 2] and tasks.splits() == ["test", "train"]
    train = {"".join(t.data["grid"]) for t in tasks.split("train")}
    test = {"".join(t.data["grid"]) for t in tasks.split("test")}
    assert len(test) == len(tasks.split("test")) and not train & test
    sides = [len(tasks.level(level)[0].data["grid"]) for level in (0, 1, 2)]
    assert sides == sorted(sides) and sides[0] < sides[2]


def test_episode_contract_and_reward_terms():
    env = GridWorldEnv(split="test", shaping="potential")
    obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and info["task_id"].startswith("world-") and info["admissible_actions"]
    steps = [env.step(env.expert_action(0.7)) for _ in range(15)] + [env.step("garbage"), env.step(command("fly"))]
    for obs, reward, terminated, truncated, info in steps:
        assert isinstance(obs, str) and isinstance(info["success"], bool)
        assert env.reward_range[0] <= reward <= env.reward_range[1]
        assert reward == pytest.approx(sum(info["reward_terms"].values()))
        if terminated or truncated:
            break
    assert json.loads(json.dumps(env.state()))["task_id"] == env.task.id


def test_same_seed_same_episode():
    def trace(seed):
        env = GridWorldEnv(split="test", perturbation="noisy_observation")
        out = [env.reset(seed=seed)[0]]
        for _ in range(12):
            obs, reward, *_ = env.step(env.expert_action(0.5))
            out.append((obs, reward))
        return out

    assert trace(7) == trace(7)
    assert trace(7) != trace(8)


@pytest.mark.parametrize("perturbation", [None, *GridWorldEnv.perturbations])
def test_expert_solves_test_tasks_under_every_perturbation(perturbation):
    rates = success_by_level(GridWorldEnv(split="test", perturbation=perturbation), policy_skill=1.0)
    assert all(rate >= 0.99 for rate in rates.values()), rates


def test_weaker_expert_and_random_agent_solve_less():
    env = GridWorldEnv(split="test")
    half = success_by_level(env, policy_skill=0.5)
    rand = success_by_level(env, policy_skill=None)
    assert sum(half.values()) / 3 <= 0.85, half
    assert all(rate <= 0.05 for rate in rand.values()), rand


def test_partial_observability_and_short_observations(tokenizer):
    env = GridWorldEnv(split="test")
    task = env.tasks.level(2)[0]
    layout = parse_layout(task.data["grid"], task.id)
    obs, _ = env.reset(seed=0, options={"task": task})
    view = [line for line in obs.splitlines() if len(line) == 5 and set(line) <= set("#.@KDG/")]
    assert len(view) == 5 and "@" in view[2][2]
    assert "K" not in "".join(view)  # level 2 hides the key at the start
    assert abs(layout.start[0] - layout.goal[0]) > 2 or abs(layout.start[1] - layout.goal[1]) > 2
    for _ in range(30):
        obs, *_ = env.step(env.expert_action(1.0))
        assert len(tokenizer(obs)["input_ids"]) <= 200


def test_subgoals_pay_once_and_loops_earn_nothing():
    env = GridWorldEnv(split="test", shaping="potential")
    env.reset(seed=0, options={"task": env.tasks.level(1)[3]})
    paid = []
    while not env.has_key:
        paid.append(env.step(env.expert_action(1.0))[4]["reward_terms"])
    assert sum(t.get("subgoal/key", 0) for t in paid) == pytest.approx(0.1)
    _, reward, *_, info = env.step(command("pick up key"))
    assert info["error"] == "invalid_action" and reward < 0
    moves = [a[len("<action>"):-len("</action>")] for a in env._admissible() if "go " in a]
    back = {"go north": "go south", "go south": "go north", "go east": "go west", "go west": "go east"}
    loop_terms = []
    for _ in range(5):  # walk away and back: potential shaping telescopes to exactly zero
        loop_terms.append(env.step(command(moves[0]))[4]["reward_terms"])
        loop_terms.append(env.step(command(back[moves[0]]))[4]["reward_terms"])
    assert sum(t.get("shaping/potential", 0) for t in loop_terms) == pytest.approx(0.0, abs=1e-9)
    assert sum(sum(t.values()) for t in loop_terms) < 0


def test_potential_shaping_telescopes_over_a_solved_episode():
    env = GridWorldEnv(split="test", shaping="potential", shaping_scale=0.3)
    traj = play_expert(env, env.tasks.level(2)[1], skill=1.0, seed=0)
    assert traj.success
    assert sum(t.reward_terms["shaping/potential"] for t in traj.turns) == pytest.approx(0.3)


def test_renamed_labels_change_the_commands():
    env = GridWorldEnv(split="test", perturbation="renamed_labels")
    traj = play_expert(env, env.tasks.level(0)[0], skill=1.0, seed=0)
    actions = [t.action for t in traj.turns]
    assert traj.success and command("pick up card") in actions and command("open gate") in actions
    assert "exit" in env.system_prompt() or "gate" in env.system_prompt()
    env.reset(seed=0, options={"task": env.tasks.level(0)[0]})
    assert env.step(command("open door"))[4]["error"] == "invalid_action"


def test_unknown_perturbation_lists_valid_ones():
    with pytest.raises(ValueError, match="distractors.*paraphrase|noisy_observation"):
        GridWorldEnv(perturbation="earthquake")


def test_task_file_round_trip_and_malformed_lines(tmp_path):
    good = generate_tasks(0).split("test")
    path = tmp_path / "world.jsonl"
    TaskSet(list(good)[:2]).save(path)
    assert [t.id for t in GridWorldEnv(str(path), split="test").tasks] == [t.id for t in list(good)[:2]]
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[1]["data"]["grid"] = [row.replace("K", ".") for row in rows[1]["data"]["grid"]]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskFileError, match=rf"{path}:2: field 'data.grid' needs exactly one 'K'"):
        GridWorldEnv(str(path), split=None)
    walled = dict(rows[0], data={**rows[0]["data"], "grid": ["#####", "#SDK#", "##G##", "#####"]})
    path.write_text(json.dumps(walled) + "\n")
    with pytest.raises(TaskFileError, match=rf"{path}:1: field 'data.grid' is not solvable"):
        GridWorldEnv(str(path), split=None)


def test_gymnasium_check_env_passes():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(GridWorldEnv(render_mode="ansi"), skip_render_check=True)
    assert isinstance(make("world-v0", split="test").unwrapped, GridWorldEnv)


@pytest.mark.parametrize("perturbation", [None, "noisy_observation", "distractors"])
def test_project_checker_passes(perturbation):
    report = checker.check_env("world-v0", n_random_actions=150, gymnasium_check=False,
                               env_kwargs={**{"shaping": "potential"}, "perturbation": perturbation})
    assert report.ok, report.format()
