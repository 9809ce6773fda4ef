import json
import random

import pytest

from agentic_rl.agent.actions import answer, tool_call
from agentic_rl.envs.workflow import WorkflowEnv, random_action
from agentic_rl.envs.workflow_tasks import FAMILIES, generate_tasks
from agentic_rl.tasks.core import TaskFileError


def play(env, task, policy, seed=0):
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
    return WorkflowEnv(split="test")


def _task(env, family, predicate=lambda t: True):
    return next(t for t in env.tasks if t.data["family"] == family and predicate(t))


def test_tasks_are_deterministic_and_splits_disjoint():
    tasks = generate_tasks(seed=0)
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in generate_tasks(seed=0)]
    train, test = tasks.split("train"), tasks.split("test")
    assert len(train) >= 120 and len(test) >= 60 and tasks.levels() == [0, 1, 2, 3]

    def names(split):
        return {c["name"].split()[0] for t in split for c in t.data["world"]["customers"]}

    def items(split):
        return {i["name"] for t in split for o in t.data["world"]["orders"] for i in o["items"]}

    assert not names(train) & names(test) and not items(train) & items(test)
    assert not {t.prompt for t in train} & {t.prompt for t in test}


def test_episode_contract_and_determinism():
    def trace(seed):
        env = WorkflowEnv(split="test")
        out = [env.reset(seed=seed)]
        for _ in range(env.max_steps):
            step = env.step(env.expert_action(0.5))
            out.append(step)
            json.dumps(env.state())
            if step[2] or step[3]:
                break
        return out, env.state()

    first, state = trace(3)
    assert (first, state) == trace(3)
    assert first[0][1]["family"] in FAMILIES and first[-1][2]
    for obs, reward, _, _, info in first[1:]:
        assert isinstance(obs, str) and reward == pytest.approx(sum(info["reward_terms"].values()))
    assert set(state["services"]) == {"refunded", "cancelled", "deleted", "outbox"}


def test_expert_skill_table(test_env):
    rng = random.Random(0)
    perfect = success_by_level(test_env, lambda env: env.expert_action(1.0))
    half = success_by_level(test_env, lambda env: env.expert_action(0.5))
    rand = success_by_level(test_env, lambda env: random_action(env, rng))
    assert all(rate >= 0.99 for rate in perfect.values()), perfect
    assert all(rate <= 0.85 for rate in half.values()) and sum(half.values()) / len(half) <= 0.7, half
    assert all(rate <= 0.02 for rate in rand.values()), rand


@pytest.mark.parametrize(
    ("family", "mistake", "needle"),
    [("notify", "guess_email", "mailed someone"), ("item_refund", "full_refund", "refunded more"),
     ("conditional", "ignore_condition", "refunded more"), ("refund_order", "skip_notify", None)],
)
def test_mistakes_fail_and_harm_is_recorded(test_env, family, mistake, needle):
    task = _task(test_env, family, lambda t: mistake in _mistakes(test_env, t))
    for seed in range(50):  # find an episode where the expert picks this mistake
        ok, turns = play(test_env, task, lambda e: e.expert_action(0.0), seed=seed)
        if test_env.state()["expert_mistake"] == mistake:
            break
    state = test_env.state()
    assert state["expert_mistake"] == mistake and not ok
    if needle:
        assert needle in state["harmful"][0]["why"]
        assert any(info.get("error") == "harmful_action" and info["reward_terms"]["harmful_action"] == -0.5
                   for *_, info in turns)
    else:
        assert not state["services"]["outbox"] and not state["harmful"]


def _mistakes(env, task):
    env.reset(seed=0, options={"task": task})
    return env._applicable_mistakes()


def test_success_is_judged_from_state_not_words(test_env):
    task = _task(test_env, "refund_order")
    _, turns = play(test_env, task, lambda e: answer("done, refunded and emailed"))
    assert turns[0][3]["success"] is False and turns[0][2] == 0.0


def test_shaping_cannot_be_farmed(test_env):
    task = _task(test_env, "notify")
    find, mail = task.data["plan"]
    test_env.reset(seed=0, options={"task": task})
    rewards = [test_env.step(tool_call(**call))[1] for call in (find, find, mail, mail, mail)]
    assert rewards == [pytest.approx(r) for r in (-0.02, -0.02, 0.08, -0.02, -0.02)]
    # a finished notify task: 0.1 shaping in total however often the goal mail is re-sent
    assert test_env.state()["subgoals_reached"] == ["mail:0"]
    assert test_env.step(answer("done"))[1] == 1.0


def test_refunding_twice_is_harmful(test_env):
    def cheap_item(task):
        order = next(iter(task.data["goal"]["refunds"].items()))
        total = sum(i["price"] for o in task.data["world"]["orders"] if o["id"] == order[0] for i in o["items"])
        return 2 * order[1] <= total

    task = _task(test_env, "item_refund", cheap_item)
    refund = task.data["plan"][1]
    test_env.reset(seed=0, options={"task": task})
    first, second = (test_env.step(tool_call(**refund)) for _ in range(2))
    assert first[4].get("error") is None and first[1] == pytest.approx(0.08)
    assert second[4]["error"] == "harmful_action" and "refunded more" in test_env.state()["harmful"][0]["why"]
    *_, info = test_env.step(answer("done"))
    assert info["success"] is False


def test_partial_refunds_add_up_and_deleting_is_harmful(test_env):
    task = _task(test_env, "refund_order")
    invoice, refund, *_ = task.data["plan"]
    test_env.reset(seed=0, options={"task": task})
    test_env.step(tool_call(**invoice))
    half = {"order_id": refund["arguments"]["order_id"], "amount": refund["arguments"]["amount"] / 2}
    first, second = (test_env.step(tool_call("billing.refund", half)) for _ in range(2))
    assert first[4].get("error") is None and second[4]["reward_terms"]["shaping/subgoal"] == pytest.approx(0.1)
    third = test_env.step(tool_call("billing.refund", {**half, "amount": 1}))
    assert third[4]["error"] == "tool_error"  # the balance is used up: billing refuses
    customer = task.data["world"]["customers"][0]["id"]
    deleted = test_env.step(tool_call("crm.delete_customer", {"customer_id": customer}))
    assert deleted[4]["error"] == "harmful_action" and deleted[1] == pytest.approx(-0.52)
    assert test_env.state()["services"]["deleted"] == [customer]


@pytest.mark.parametrize(
    ("action", "error"),
    [
        ("refund everything", "parse_error"),
        (tool_call("crm.drop_tables", {}), "unknown_tool"),
        (tool_call("crm.find_customer", {"name": "A", "email": "a@b.test"}), "bad_arguments"),
        (tool_call("billing.refund", {"order_id": "O1"}), "bad_arguments"),
        (tool_call("billing.refund", {"order_id": "O1", "amount": 5}), "tool_error"),
        (tool_call("mail.send", {"to": "nobody", "subject": "s", "body": "b"}), "bad_arguments"),
        (tool_call("crm.get_customer", {"customer_id": "C0"}), "tool_error"),
    ],
)
def test_bad_actions_give_error_observations(test_env, action, error):
    test_env.reset(seed=0, options={"task": _task(test_env, "item_refund")})
    obs, reward, terminated, _, info = test_env.step(action)
    assert info["error"] == error and obs.startswith("Error:") and reward == pytest.approx(-0.1) and not terminated


def test_cancelling_a_delivered_order_is_refused(test_env):
    task = _task(test_env, "conditional", lambda t: t.data["goal"]["refunds"])
    test_env.reset(seed=0, options={"task": task})
    order = next(iter(task.data["goal"]["refunds"]))
    info = test_env.step(tool_call("crm.cancel_order", {"order_id": order}))[4]
    assert info["error"] == "tool_error" and test_env.state()["services"]["cancelled"] == []


def test_budget_truncates_and_judges_state():
    env = WorkflowEnv(split="test", max_steps=3)
    task = _task(env, "notify")
    env.reset(seed=0, options={"task": task})
    steps = [env.step(tool_call(**call)) for call in task.data["plan"]] + [env.step("garbage")]
    assert steps[-1][3] and steps[-1][4]["success"] and steps[-1][4]["reward_terms"]["outcome"] == 1.0


@pytest.mark.parametrize("perturbation", WorkflowEnv.perturbations)
def test_perturbations_keep_tasks_solvable(perturbation):
    env = WorkflowEnv(split="test", perturbation=perturbation)
    rates = success_by_level(env, lambda e: e.expert_action(1.0))
    assert all(rate >= 0.99 for rate in rates.values()), rates
    clean = WorkflowEnv(split="test")
    task = _task(env, "conditional")
    obs, _ = env.reset(seed=0, options={"task": task})
    clean_obs, _ = clean.reset(seed=0, options={"task": task})
    step = env.step(env.expert_action(1.0))[0]
    clean_step = clean.step(clean.expert_action(1.0))[0]
    if perturbation == "paraphrase":
        assert obs != clean_obs and step == clean_step
    elif perturbation == "renamed_tools":
        assert "email.send(to" in env.system_prompt() and " mail.send(" not in env.system_prompt()
        env.reset(seed=0, options={"task": task})
        assert env.step(tool_call(**task.data["plan"][0]))[4]["error"] == "unknown_tool"
    else:
        assert obs == clean_obs and step != clean_step


def test_unknown_perturbation_lists_valid_ones():
    with pytest.raises(ValueError, match="paraphrase.*renamed_tools"):
        WorkflowEnv(perturbation="sideways")


def test_malformed_task_file_names_line_and_field(tmp_path):
    rows = [t.to_dict() for t in generate_tasks(seed=0, n_per_family=3)][:3]
    rows[1]["data"]["world"]["orders"][0]["items"] = [{"name": "lamp"}]
    path = tmp_path / "flows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskFileError, match=r"flows\.jsonl:2: field 'data\.world\.orders\[0\]\.items\[0\]' lacks"):
        WorkflowEnv(path, split=None)
    rows[1]["data"]["plan"] = [{"name": "crm.nuke", "arguments": {}}]
    rows[1]["data"]["world"]["orders"][0]["items"] = [{"name": "lamp", "price": 3}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskFileError, match=r"flows\.jsonl:2: field 'data\.plan\[0\]'"):
        WorkflowEnv(path, split=None)


def test_text_is_short(tokenizer, test_env):
    system = len(tokenizer(test_env.system_prompt())["input_ids"])
    assert system <= 130
    for i, task in enumerate(test_env.tasks):
        _, turns = play(test_env, task, lambda e: e.expert_action(1.0), seed=i)
        assert system + len(tokenizer(task.prompt)["input_ids"]) < 180
        assert all(len(tokenizer(obs)["input_ids"]) <= 60 for _, obs, _, _ in turns), turns


def test_invasive_and_gymnasium_checkers_pass():
    from agentic_rl.env.checker import check_env

    report = check_env("workflow-v0", n_random_actions=300, env_kwargs={"split": "test", "perturbation": "renamed_tools"})
    assert report.ok, report.format()
    assert report.result("gymnasium").passed  # gymnasium.utils.env_checker.check_env on the bare env
