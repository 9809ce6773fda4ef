import json
import random
import re
import warnings

import pytest

from agentic_rl.agent.actions import answer, command
from agentic_rl.env import checker
from agentic_rl.env.registry import make
from agentic_rl.envs import web_site as site
from agentic_rl.envs.experts import play_expert
from agentic_rl.envs.web import PER_PAGE, WebShopEnv, generate_tasks
from agentic_rl.tasks.core import TaskFileError, TaskSet


def success_by_level(env, skill=None):
    """Per-level success of the expert at ``skill``, or of an agent picking uniformly among the admissible
    actions (plus a guessed answer on fact tasks) when ``skill`` is None."""
    by_level = {}
    rng = random.Random(0)
    for i, task in enumerate(env.tasks):
        if skill is not None:
            ok = play_expert(env, task, skill=skill, seed=i).success
        else:
            _, info = env.reset(seed=i, options={"task": task})
            while True:
                choices = info["admissible_actions"] + ([answer("4.2")] if task.data["kind"] == "fact" else [])
                _, _, terminated, truncated, info = env.step(rng.choice(choices))
                if terminated or truncated:
                    break
            ok = info["success"]
        by_level.setdefault(task.difficulty, []).append(ok)
    return {level: sum(v) / len(v) for level, v in sorted(by_level.items())}


def open_task(env, kind, level, seed=0):
    task = next(t for t in env.tasks.level(level) if t.data["kind"] == kind)
    obs, info = env.reset(seed=seed, options={"task": task})
    return task, obs, info


def goto_product(env, product):
    """Search the product's title and page through the results until its line can be clicked."""
    obs, *_ = env.step(command(f"search {site.title(product)}"))
    line = f"{site.title(product)} - ${product['price']:.2f}"
    while line not in obs:
        obs, *_ = env.step(command("next"))
    index = next(m.group(1) for m in re.finditer(r"^\[(\d)\] (.*)$", obs, re.M) if m.group(2) == line)
    obs, *_ = env.step(command(f"click {index}"))
    assert obs.splitlines()[1] == f"== {site.title(product)} =="


def test_tasks_levels_splits_and_determinism():
    tasks = generate_tasks.__wrapped__(0)  # bypass the cache: really generate twice
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in generate_tasks.__wrapped__(0)]
    assert [t.prompt for t in generate_tasks.__wrapped__(1)] != [t.prompt for t in tasks]
    assert tasks.levels() == [0, 1, 2] and tasks.splits() == ["test", "train"]
    categories = {s: {p["category"] for t in tasks.split(s) for p in t.data["products"]} for s in ("train", "test")}
    assert categories["train"] and not categories["train"] & categories["test"]  # held-out = unseen products
    assert {t.data["kind"] for t in tasks.split("test")} == {"buy", "fact"}
    assert {t.data.get("goal") for t in tasks.level(2)} >= {"cheapest", "best_rated", None}
    assert all(len(t.data["constraints"]) < len(u.data["constraints"])
               for t in tasks.level(0) for u in tasks.level(1) if t.data["kind"] == u.data["kind"] == "buy")


def test_episode_contract_and_reward_terms():
    env = WebShopEnv(split="test")
    obs, info = env.reset(seed=5)
    assert obs.startswith("Task: ") and info["admissible_actions"] and info["task_id"].startswith("web-")
    actions = [env.expert_action(0.6) for _ in range(1)] + ["nonsense", command("click 99"), command("buy")]
    for action in actions + [env.expert_action(0.6) for _ in range(20)]:
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.reward_range[0] <= reward <= env.reward_range[1]
        assert reward == pytest.approx(sum(info["reward_terms"].values()))
        assert all(a.startswith("<action>") for a in info["admissible_actions"])
        if terminated or truncated:
            break
    assert json.loads(json.dumps(env.state()))["task_id"] == env.task.id


def test_same_seed_same_episode():
    def trace(seed):
        env = WebShopEnv(split="test", perturbation="noisy_observation")
        out = [env.reset(seed=seed)[0]]
        for _ in range(8):
            obs, reward, terminated, truncated, _ = env.step(env.expert_action(0.5))
            out.append((obs, reward))
            if terminated or truncated:
                break
        return out

    assert trace(11) == trace(11)
    assert trace(11) != trace(12)


@pytest.mark.parametrize("perturbation", [None, *WebShopEnv.perturbations])
def test_expert_solves_test_tasks_under_every_perturbation(perturbation):
    rates = success_by_level(WebShopEnv(split="test", perturbation=perturbation), skill=1.0)
    assert all(rate >= 0.99 for rate in rates.values()), rates


def test_weaker_expert_and_random_agent_solve_less():
    env = WebShopEnv(split="test")
    half = success_by_level(env, skill=0.5)
    rand = success_by_level(env, skill=None)
    assert sum(half.values()) / 3 <= 0.8, half
    assert sum(rand.values()) / 3 <= 0.05, rand


def test_pages_show_at_most_five_results_and_paginate(tokenizer):
    env = WebShopEnv(split="test")
    task, obs, _ = open_task(env, "buy", 2)
    while task.data.get("goal") is not None:  # a look-alike task: the item is past the first page
        task = next(t for t in env.tasks.level(2) if t.data["kind"] == "buy" and t.id > task.id)
    env.reset(seed=0, options={"task": task})
    obs, *_ , info = env.step(command(f"search {site.canonical_query(task.data)}"))
    assert len(re.findall(r"^\[\d\] ", obs, re.M)) == PER_PAGE and command("next") in info["admissible_actions"]
    first_page = obs
    target = site.title(site.targets(task.data)[0])
    obs, *_ = env.step(command("next"))
    assert "page 2/" in obs and obs != first_page
    obs, *_ = env.step(command("prev"))
    assert obs == first_page
    assert len(tokenizer(first_page)["input_ids"]) <= 250 and target.split()[-1] in first_page


def test_buying_a_near_miss_earns_the_fraction_of_checks_passed():
    env = WebShopEnv(split="test")
    task, _, _ = open_task(env, "buy", 1)
    right = {p["id"] for p in site.targets(task.data)}
    wrong = next(p for p in task.data["products"] if p["category"] == task.data["constraints"]["category"]
                 and p["id"] not in right)
    passed = site.checks(wrong, task.data)
    goto_product(env, wrong)
    _, reward, terminated, _, info = env.step(command("buy"))
    assert terminated and not info["success"] and sum(passed.values()) < len(passed)
    assert info["reward_terms"]["outcome"] == pytest.approx(sum(passed.values()) / len(passed))


def test_fact_answers_are_checked_leniently():
    env = WebShopEnv(split="test")
    task, _, _ = open_task(env, "fact", 0)
    product = site.targets(task.data)[0]
    expected = site.field_text(product, task.data["field"])
    shown = f"${expected}" if task.data["field"] == "price" else f" {expected.upper()} "
    _, reward, terminated, _, info = env.step(answer(shown))
    assert terminated and info["success"] and info["reward_terms"]["outcome"] == 1.0
    env.reset(seed=0, options={"task": task})
    _, _, terminated, _, info = env.step(answer("no idea"))
    assert terminated and not info["success"] and info["reward_terms"]["outcome"] == 0.0


def test_browsing_is_not_farmable():
    env = WebShopEnv(split="test")
    task, _, _ = open_task(env, "buy", 0)
    env.step(command(f"search {site.canonical_query(task.data)}"))
    index = next(i for i, line in enumerate(env._page_lines()[1:], 1)
                 if site.title(site.targets(task.data)[0]) in line)
    rewards = []
    for _ in range(4):
        rewards.append(env.step(command(f"click {index}"))[4]["reward_terms"])
        rewards.append(env.step(command("back"))[4]["reward_terms"])
    assert sum(t.get("subgoal/found", 0) for t in rewards) == pytest.approx(env.found_reward)
    assert sum(sum(t.values()) for t in rewards) < env.found_reward


def test_renamed_labels_and_wrong_kind_actions():
    env = WebShopEnv(split="test", perturbation="renamed_labels")
    task, obs, info = open_task(env, "buy", 0)
    assert command("open 1") in info["admissible_actions"] and "find <words>" in obs
    assert env.step(command("search hat"))[4]["error"] == "invalid_action"
    assert env.step(answer("42"))[4]["error"] == "invalid_action"  # a buy task takes no answer


def test_distractors_add_near_misses_that_never_match():
    env = WebShopEnv(split="test", perturbation="distractors")
    for task in list(env.tasks)[::7]:
        env.reset(seed=1, options={"task": task})
        extra = [p for p in env.data["products"] if p["id"].startswith("x")]
        assert 3 <= len(extra) <= 5 and not set(env.target_ids) & {p["id"] for p in extra}
        assert env.target_ids == {p["id"] for p in site.targets(task.data)}


def test_unknown_perturbation_lists_valid_ones():
    with pytest.raises(ValueError, match="reordered_results"):
        WebShopEnv(perturbation="flood")


def test_task_file_round_trip_and_malformed_lines(tmp_path):
    good = list(generate_tasks(0).split("test"))[:3]
    path = tmp_path / "shop.jsonl"
    TaskSet(good).save(path)
    assert len(WebShopEnv(str(path), split="test").tasks) == 3
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[2]["data"]["products"][1]["price"] = "cheap"
    path.write_text("# my shop tasks\n" + "\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskFileError, match=rf"{path}:4: field 'data\.products\[1\]\.price' must be a number, got 'cheap'"):
        WebShopEnv(str(path))
    rows[2]["data"]["products"][1]["price"] = 3.0
    rows[2]["data"]["constraints"]["colour"] = "ultraviolet"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskFileError, match=rf"{path}:3: field 'data.constraints' must describe"):
        WebShopEnv(str(path))


def test_gymnasium_check_env_passes():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(WebShopEnv(render_mode="ansi"), skip_render_check=True)
    assert isinstance(make("web-v0", split="test").unwrapped, WebShopEnv)


@pytest.mark.parametrize("perturbation", [None, "noisy_observation", "distractors"])
def test_project_checker_passes(perturbation):
    report = checker.check_env("web-v0", n_random_actions=150, gymnasium_check=False,
                               env_kwargs={**{}, "perturbation": perturbation})
    assert report.ok, report.format()
