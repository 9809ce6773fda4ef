import json
import random

import pytest

from agentic_rl.agent.actions import answer, tool_call
from agentic_rl.envs.tool_use import RENAMED_TOOLS, ToolUseEnv, random_action
from agentic_rl.envs.tool_use_tasks import FAMILIES, LEVELS, generate_tasks
from agentic_rl.envs.tool_use_tools import answer_is_correct, calculate
from agentic_rl.tasks.core import TaskFileError


def play(env, task, policy, seed=0):
    """One episode; returns (success, turns) with turns = [(action, obs, reward, info)]."""
    env.reset(seed=seed, options={"task": task})
    turns, info = [], {}
    for _ in range(env.max_steps):
        action = policy(env)
        obs, reward, terminated, truncated, info = env.step(action)
        turns.append((action, obs, reward, info))
        if terminated or truncated:
            break
    return bool(info.get("success")), turns


def success_by_level(env, policy):
    by_level = {}
    for i, task in enumerate(env.tasks):
        ok, _ = play(env, task, policy, seed=i)
        by_level.setdefault(task.difficulty, []).append(ok)
    return {level: sum(v) / len(v) for level, v in sorted(by_level.items())}


@pytest.fixture(scope="module")
def test_env():
    return ToolUseEnv(split="test")


def test_tasks_are_deterministic_and_splits_disjoint():
    tasks = generate_tasks(seed=0)
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in generate_tasks(seed=0)]
    assert [t.prompt for t in generate_tasks(seed=1)] != [t.prompt for t in tasks]
    train, test = tasks.split("train"), tasks.split("test")
    assert len(train) >= 200 and len(test) >= 100
    assert tasks.levels() == [0, 1, 2, 3, 4]
    assert {t.data["family"] for t in test} == set(FAMILIES)
    assert not {t.prompt for t in train} & {t.prompt for t in test}
    train_entities = {e for t in train for e in t.data["kb"]}
    test_entities = {e for t in test for e in t.data["kb"]}
    assert train_entities and test_entities and not train_entities & test_entities
    assert all(t.difficulty == LEVELS[t.data["family"]] and t.data["family"] in t.tags for t in tasks)


def test_episode_contract_and_determinism():
    def trace(seed):
        env = ToolUseEnv(split="test")
        out = [env.reset(seed=seed)]
        for _ in range(6):
            step = env.step(env.expert_action(0.5))
            out.append(step)
            json.dumps(env.state())  # JSON-serialisable at every step
            if step[2] or step[3]:
                break
        return out

    first = trace(7)
    assert first == trace(7)
    obs, info = first[0]
    assert isinstance(obs, str) and info["task_id"] and info["family"] in FAMILIES and info["success"] is False
    for obs, reward, _, _, info in first[1:]:
        assert isinstance(obs, str) and isinstance(info["success"], bool)
        assert reward == pytest.approx(sum(info["reward_terms"].values()))
    assert first[-1][2]  # the expert always ends with an answer


@pytest.mark.parametrize("seed", [0, 1])
def test_expert_skill_table(test_env, seed):
    rng = random.Random(seed)
    perfect = success_by_level(test_env, lambda env: env.expert_action(1.0))
    half = success_by_level(test_env, lambda env: env.expert_action(0.5))
    rand = success_by_level(test_env, lambda env: random_action(env, rng))
    assert all(rate >= 0.99 for rate in perfect.values()), perfect
    # the direct habit still answers right (one wasted step); every tool-needing level drops clearly
    assert half[0] >= 0.99 and all(half[level] <= 0.75 for level in (1, 2, 3, 4)), half
    assert all(rate <= 0.02 for rate in rand.values()), rand


def test_habits_are_the_documented_mistakes(test_env):
    env = test_env
    families = {}
    for task in env.tasks:
        families.setdefault(task.data["family"], task)
    for family, task in families.items():
        ok, turns = play(env, task, lambda e: e.expert_action(0.0))
        kinds = ["tool" if a.startswith("<tool>") else "answer" for a, *_ in turns]
        assert env.state()["expert_habit"] is True
        expected = {"direct": ["tool", "answer"], "calc": ["answer"], "convert": ["answer"], "lookup": ["answer"],
                    "lookup_calc": ["answer"], "compare": ["tool", "answer"]}[family]
        assert kinds == expected, (family, turns)
        assert ok is (family == "direct"), family  # a habit's guess is never right by accident


def test_habit_rate_follows_skill():
    env = ToolUseEnv(split="train")
    habits = []
    for seed in range(300):
        env.reset(seed=seed)
        env.expert_action(0.4)
        habits.append(env.state()["expert_habit"])
    assert 0.5 < sum(habits) / len(habits) < 0.7


def test_habit_rates_set_the_habit_per_family():
    env = ToolUseEnv(split="train", habit_rates={"direct": 1.0, "calc": 0.0})
    seen: dict[str, set] = {}
    for seed in range(80):
        env.reset(seed=seed)
        env.expert_action(0.5)
        seen.setdefault(env.state()["family"], set()).add(env.state()["expert_habit"])
        env.reset(seed=seed)
        env.expert_action(1.0)  # the flawless expert stays flawless
        assert env.state()["expert_habit"] is False
    assert seen["direct"] == {True} and seen["calc"] == {False}
    assert seen["lookup"] == {True, False}  # other families: 1 - skill
    with pytest.raises(ValueError, match="habit_rates\\['calc'\\]"):
        ToolUseEnv(split="train", habit_rates={"calc": 1.5})


def _task(env, family):
    return next(t for t in env.tasks if t.data["family"] == family)


def test_shaping_cannot_be_farmed(test_env):
    env = test_env
    task = _task(env, "lookup_calc")
    lookup_call, calc_call = task.data["needed"]
    env.reset(seed=0, options={"task": task})
    rewards, infos = [], []
    for action in [tool_call(**lookup_call)] * 3:
        _, reward, _, _, info = env.step(action)
        rewards.append(reward)
        infos.append(info)
    assert rewards[0] == pytest.approx(0.05) and rewards[1:] == [pytest.approx(-0.05)] * 2
    assert [i.get("error") for i in infos] == [None, "repeated_action", "repeated_action"]
    # the same needed value computed three different ways still earns its bonus once
    a, op, b = calc_call["arguments"]["expression"].split()
    variants = [f"{a}{op}{b}", f"({a}) {op} {b}", f"{a} {op} {b} + 0"]
    shaping = [env.step(tool_call("calculator", {"expression": v}))[4]["reward_terms"]["shaping/needed_tool"]
               for v in variants]
    assert shaping == [pytest.approx(0.1), 0.0, 0.0]
    # a bare number does not count as computing the needed value
    env.reset(seed=0, options={"task": task})
    bare = env.step(tool_call("calculator", {"expression": str(task.data["answer"])}))[4]
    assert bare["reward_terms"]["shaping/needed_tool"] == 0.0


def test_unneeded_tool_costs_and_direct_answer_is_best(test_env):
    task = _task(test_env, "direct")
    _, direct = play(test_env, task, lambda e: answer(task.data["answer"]))
    _, detour = play(test_env, task, lambda e: e.expert_action(0.0))
    assert sum(r for _, _, r, _ in direct) == pytest.approx(1.0)
    assert sum(r for _, _, r, _ in detour) == pytest.approx(0.95)


@pytest.mark.parametrize(
    ("action", "error"),
    [
        ("I think it is 5", "parse_error"),
        ('<tool>{"name": "search", "arguments": {}}</tool>', "unknown_tool"),
        (tool_call("calculator", {"expr": "1+1"}), "bad_arguments"),
        (tool_call("lookup", {"entity": 3, "field": "area"}), "bad_arguments"),
        (tool_call("convert", {"value": "many", "from_unit": "km", "to_unit": "m"}), "bad_arguments"),
        (tool_call("calculator", {"expression": "__import__('os').system('ls')"}), "tool_error"),
        (tool_call("calculator", {"expression": "1/0"}), "tool_error"),
        (tool_call("calculator", {"expression": "9**9**9"}), "tool_error"),
        (tool_call("lookup", {"entity": "Nowhere", "field": "area"}), "tool_error"),
        (tool_call("convert", {"value": 3, "from_unit": "km", "to_unit": "kg"}), "tool_error"),
    ],
)
def test_bad_actions_give_error_observations(test_env, action, error):
    test_env.reset(seed=0, options={"task": _task(test_env, "lookup")})
    obs, reward, terminated, truncated, info = test_env.step(action)
    assert info["error"] == error and obs.startswith("Error:") and reward == pytest.approx(-0.1)
    assert not terminated and info["reward_terms"] == {"invalid_action": -0.1}


def test_garbage_never_raises_and_budget_truncates():
    env = ToolUseEnv(split="test", max_steps=4)
    env.reset(seed=0)
    for i in range(4):
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        assert not terminated and truncated is (i == 3)


def test_calculator_and_answer_checking():
    assert calculate("(1234 + 66) * 2 - 7 // 2") == 2597
    assert answer_is_correct("10,063", 10063) and answer_is_correct(" 59.55 km", 59.55)
    assert answer_is_correct("59.549", 59.55) and not answer_is_correct("59.5", 59.55)
    assert not answer_is_correct("10063 or 10064", 10063) and not answer_is_correct("many", 10063)
    assert answer_is_correct("veltra.", "Veltra") and not answer_is_correct("Veltra or Dorun", "Veltra")


@pytest.mark.parametrize("perturbation", ToolUseEnv.perturbations)
def test_perturbations_keep_tasks_solvable(perturbation):
    env = ToolUseEnv(split="test", perturbation=perturbation)
    rates = success_by_level(env, lambda e: e.expert_action(1.0))
    assert all(rate >= 0.99 for rate in rates.values()), rates
    clean = ToolUseEnv(split="test")
    task = _task(env, "compare")
    obs, _ = env.reset(seed=0, options={"task": task})
    clean_obs, _ = clean.reset(seed=0, options={"task": task})
    step = env.step(env.expert_action(1.0))[0]
    clean_step = clean.step(clean.expert_action(1.0))[0]
    if perturbation == "paraphrase":
        assert obs != clean_obs and step == clean_step
    elif perturbation == "renamed_tools":
        assert RENAMED_TOOLS["lookup"] in env.system_prompt() and "lookup(" not in env.system_prompt()
        env.reset(seed=0, options={"task": task})
        assert env.step(tool_call("lookup", task.data["needed"][0]["arguments"]))[4]["error"] == "unknown_tool"
    else:
        assert obs == clean_obs and step != clean_step


def test_a_task_can_carry_its_own_perturbation_unless_the_env_sets_one(tmp_path):
    from dataclasses import replace

    plain = ToolUseEnv(split="test")
    task = _task(plain, "lookup")
    variant = replace(task, data={**task.data, "perturbation": "reordered_results"})
    plain.reset(seed=0, options={"task": task})
    call = plain.expert_action(1.0)
    clean = plain.step(call)[0]
    plain.reset(seed=0, options={"task": variant})
    reordered = plain.step(call)[0]
    assert reordered != clean and reordered.endswith(clean.split(" ", 1)[1])  # the asked field moved last
    assert plain.state()["perturbation"] == "reordered_results"
    plain.reset(seed=0, options={"task": task})  # the next episode of a plain task is clean again
    assert plain.step(call)[0] == clean
    noisy = ToolUseEnv(split="test", perturbation="distractors")  # an evaluation overlay wins
    noisy.reset(seed=0, options={"task": variant})
    assert noisy.state()["perturbation"] == "distractors"
    rows = [dict(variant.to_dict(), data={**variant.data, "perturbation": "renamed_tools"})]
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:1: field 'data\.perturbation' must be one of"):
        ToolUseEnv(path, split=None)


def test_unknown_perturbation_lists_valid_ones():
    with pytest.raises(ValueError, match="paraphrase.*renamed_tools"):
        ToolUseEnv(perturbation="upside_down")


def test_malformed_task_file_names_line_and_field(tmp_path):
    good = generate_tasks(seed=0, n_per_family=3)
    rows = [t.to_dict() for t in good][:3]
    rows[2]["data"]["needed"] = [{"name": "teleport", "arguments": {}}]
    path = tmp_path / "tasks.jsonl"
    path.write_text("# my tasks\n" + "\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:4: field 'data\.needed\[0\]\.name'"):
        ToolUseEnv(path, split=None)
    del rows[2]["data"]["answer"]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:3: missing field 'data\.answer'"):
        ToolUseEnv(path, split=None)
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n")
    assert len(ToolUseEnv(path, split=None).tasks) == 2  # a user's own file works


def test_text_is_short(tokenizer):
    for perturbation in (None, "renamed_tools", "paraphrase"):
        env = ToolUseEnv(split=None, perturbation=perturbation)
        system = len(tokenizer(env.system_prompt())["input_ids"])
        assert system <= 70
        for task in env.tasks:
            prompt, _ = env.reset(seed=0, options={"task": task})
            assert system + len(tokenizer(prompt)["input_ids"]) < 120, prompt
    env = ToolUseEnv(split="test")
    for i, task in enumerate(env.tasks):
        _, turns = play(env, task, lambda e: e.expert_action(1.0), seed=i)
        for _, obs, _, _ in turns[:-1]:
            assert len(tokenizer(obs)["input_ids"]) <= 15, obs


def test_invasive_and_gymnasium_checkers_pass():
    from agentic_rl.env.checker import check_env

    report = check_env("tool-use-v0", n_random_actions=300, env_kwargs={"split": "test", "perturbation": "distractors"})
    assert report.ok, report.format()
    assert report.result("gymnasium").passed  # gymnasium.utils.env_checker.check_env on the bare env
