"""code-repair-v0: contract, actions, the seed's reward end to end, experts, task validation."""

import json
import random
import warnings

import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from agentic_rl.agent.actions import answer, tool_call
from agentic_rl.env import make
from agentic_rl.envs.code_grading import grade
from agentic_rl.envs.code_repair import CodeRepairEnv
from agentic_rl.envs.code_repair_tasks import grade_task_code, humaneval_tasks, load_task_file
from agentic_rl.envs.experts import play_expert
from agentic_rl.sandbox import Sandbox, SandboxSession
from agentic_rl.tasks.core import TaskFileError
from agentic_rl.tasks.humaneval import load_problems, problem_split

SUBMIT = tool_call("submit")


@pytest.fixture(scope="module")
def sandbox():
    return Sandbox()


@pytest.fixture(scope="module")
def env(sandbox):
    env = CodeRepairEnv(sandbox=sandbox)
    yield env
    env.close()


@pytest.fixture(scope="module")
def he_test_sample(sandbox):
    """HumanEval-derived tasks of a few test-split problems (built once, then cached)."""
    ids = sorted((p.task_id for p in load_problems() if problem_split(p.task_id) == "test"),
                 key=lambda i: int(i.split("/")[1]))[:5]
    return humaneval_tasks(sandbox, problems=ids)


def seed_formula(compiles, passed, total, new_error=False):
    return (0.2 if compiles else 0.0) + 0.3 * passed / total + (1.0 if passed == total else 0.0) - (0.5 if new_error else 0.0)


def test_reset_shows_the_numbered_file_and_visible_tests(env):
    obs, info = env.reset(options={"task": "starter-average"})
    assert info["task_id"] == "starter-average" and info["success"] is False
    assert "3 |     return sum(xs) / (len(xs) + 1)" in obs
    assert "assert average([1, 2, 3]) == 2" in obs
    assert "average([5]) == 5" not in obs  # hidden tests are never shown


def test_unedited_buggy_code_scores_what_the_formula_says(env, sandbox, he_test_sample):
    for task in [env.tasks.get("starter-fizzbuzz"), *list(he_test_sample)[:4]]:
        obs, _ = env.reset(options={"task": task})
        assert f"assert {task.data['entry_point']}(" in obs and "candidate" not in obs
        _, reward, terminated, truncated, info = env.step(SUBMIT)
        report = grade_task_code(sandbox, task, task.data["buggy_code"])  # a real sandboxed run
        assert terminated and not truncated and info["success"] is False
        assert info["tests_passed"] == report.passed
        assert reward == pytest.approx(seed_formula(report.compiles, report.passed, report.total))


def test_fix_then_submit_pays_everything_once(env):
    env.reset(options={"task": "starter-average"})
    obs, reward, *_ = env.step(tool_call("run_tests"))
    assert "Ran 1 visible test(s): 0 passed, 1 failed." in obs and "returned 1.5" in obs and reward == 0.0
    obs, reward, *_ = env.step(tool_call("replace", {"start": 3, "end": 3, "code": "    return sum(xs) / len(xs)"}))
    assert "3 |     return sum(xs) / len(xs)" in obs and reward == 0.0
    obs, reward, *_ = env.step(tool_call("run_tests"))
    assert "1 passed, 0 failed" in obs
    obs, reward, terminated, truncated, info = env.step(answer("done"))
    assert terminated and info["success"] and reward == pytest.approx(1.5)
    assert info["reward_terms"] == {"outcome/compiles": 0.2, "outcome/partial": 0.3, "outcome/all_pass": 1.0,
                                    "outcome/new_error": 0.0, }
    obs, reward, *_rest, info = env.step(SUBMIT)  # nothing more to earn after the end
    assert reward < 0 and info["error"] == "invalid_action"


def test_breaking_a_passing_test_is_a_new_error(env):
    env.reset(options={"task": "starter-average"})  # the bug leaves average([-4, 4]) == 0 passing
    env.step(tool_call("replace", {"start": 3, "end": 3, "code": "    return 1"}))
    _, reward, _, _, info = env.step(SUBMIT)
    assert info["new_error"] and info["reward_terms"]["outcome/new_error"] == -0.5
    assert reward == pytest.approx(seed_formula(True, info["tests_passed"], 4, new_error=True))


def test_breaking_the_syntax_scores_minus_half(env):
    env.reset(options={"task": "starter-average"})
    env.step(tool_call("replace", {"start": 3, "end": 3, "code": "    return sum(xs) / ("}))
    _, reward, _, _, info = env.step(SUBMIT)
    assert info["compiles"] is False and reward == pytest.approx(-0.5)


def test_level0_syntax_task_scores_zero_unfixed_and_full_when_fixed(env):
    env.reset(options={"task": "starter-gcd-syntax"})
    obs, *_ = env.step(tool_call("run_tests"))
    assert "does not compile: line 2" in obs
    _, reward, *_ = env.step(SUBMIT)
    assert reward == 0.0
    env.reset(options={"task": "starter-gcd-syntax"})
    env.step(tool_call("replace", {"start": 2, "end": 2, "code": "    while b != 0:"}))
    _, reward, _, _, info = env.step(SUBMIT)
    assert info["success"] and reward == pytest.approx(1.5)


def test_counting_calls_or_forging_records_by_test_id_does_not_pass_hidden_tests(env, sandbox):
    # Both cheats answer the visible test average([1, 2, 3]) == 2 without recognising its input: one
    # answers the first call it gets, the other writes a result record for the test's id into the
    # harness's results file (reachable from agent code) and ends the process.
    env.reset(options={"task": "starter-average"})
    counter = "_calls = []\n\ndef average(xs):\n    _calls.append(xs)\n    return 2 if len(_calls) == 1 else 0\n"
    forger = ("import json, os, sys\n"
              "with open(sys.argv[3], 'a') as out:\n"
              "    out.write(json.dumps({'id': 't0.0', 'status': 'ok', 'value': ['int', '2']}) + '\\n')\n"
              "getattr(os, '_exit')(0)\n")
    first_test_passed = [grade(sandbox, counter, env.tests, "average", rng=random.Random(seed)).results["t0"].passed
                         for seed in range(6)]
    assert not all(first_test_passed)  # the first call is a different test under most orders
    assert grade(sandbox, forger, env.tests, "average").passed == 0


def test_a_malformed_forged_record_does_not_crash_grading(env):
    env.reset(options={"task": "starter-average"})
    forged = "import json, sys\nopen(sys.argv[3], 'a').write(json.dumps({'id': [1], 'status': 'ok'}) + '\\n')\n"
    env.step(tool_call("replace", {"start": 1, "end": 0, "code": forged}))
    _, reward, terminated, _, info = env.step(SUBMIT)  # graded as the buggy code it still is
    assert terminated and info["tests_passed"] == 1 and reward == pytest.approx(seed_formula(True, 1, 4))


def test_replace_insert_delete_and_bad_ranges(env):
    env.reset(options={"task": "starter-average"})
    env.step(tool_call("replace", {"start": 1, "end": 0, "code": "# header"}))  # insert before line 1
    assert env.code.splitlines()[0] == "# header" and len(env.code.splitlines()) == 4
    env.step(tool_call("replace", {"start": 1, "end": 1, "code": ""}))  # delete it again
    assert env.code.splitlines()[0] == "def average(xs):"
    for args in ({"start": 0, "end": 1, "code": "x"}, {"start": 2, "end": 9, "code": "x"}, {"start": "1", "end": 1}):
        obs, reward, _, _, info = env.step(tool_call("replace", args))
        assert info["error"] == "bad_arguments" and reward < 0 and obs.startswith("Error")
    obs, _, _, _, info = env.step(tool_call("view", {"start": 2, "end": 2}))
    assert obs == 'solution.py:\n2 |     """Mean of a non-empty list of numbers."""'


def test_garbage_and_unknown_tools_never_raise(env):
    env.reset(options={"task": "starter-average"})
    for text, kind in [("hello", "parse_error"), ("<tool>{bad json</tool>", "parse_error"),
                       ("<action>ls</action>", "parse_error"), (tool_call("rm", {}), "unknown_tool")]:
        obs, reward, terminated, truncated, info = env.step(text)
        assert info["error"] == kind and reward == pytest.approx(-0.1) and not terminated
        assert sum(info["reward_terms"].values()) == pytest.approx(reward)
    with pytest.raises(TypeError):
        env.step(123)
    json.dumps(env.state())


def test_random_garbage_never_touches_the_sandbox(sandbox, monkeypatch):
    calls = []
    original = SandboxSession.execute
    monkeypatch.setattr(SandboxSession, "execute", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    env = CodeRepairEnv(sandbox=sandbox, max_steps=20)
    env.reset(seed=0)
    env.action_space.seed(0)
    truncations = 0
    for _ in range(400):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            truncations += 1
            env.reset()
    env.close()
    assert truncations == 20 and calls == []  # the unedited file is graded from its recorded baseline


def test_step_budget_grades_the_file_as_it_stands(sandbox):
    env = CodeRepairEnv(sandbox=sandbox, max_steps=2)
    env.reset(options={"task": "starter-clamp"})
    env.step(tool_call("replace", {"start": 2, "end": 2, "code": "    return max(low, min(x, high))"}))
    obs, reward, terminated, truncated, info = env.step(tool_call("view"))
    env.close()
    assert truncated and not terminated and info["success"] and reward == pytest.approx(1.5)
    assert "Step budget exhausted" in obs


def test_gymnasium_check_env_and_registry(sandbox):
    env = CodeRepairEnv(sandbox=sandbox)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(env)
    env.close()
    made = make("code-repair-v0", sandbox=sandbox)
    obs, info = made.reset(seed=3)
    assert "solution.py" in obs and info["task_id"].startswith("starter-")
    made.close()


def test_invasive_checker_when_available(sandbox):
    checker = pytest.importorskip("agentic_rl.env.checker")
    if not hasattr(checker, "check_env"):
        pytest.skip("agentic_rl.env.checker.check_env not available yet")
    report = checker.check_env(CodeRepairEnv(sandbox=sandbox))
    assert report.ok, report.format()


def test_expert_repairs_sampled_test_split_tasks(sandbox, he_test_sample):
    env = CodeRepairEnv(he_test_sample, sandbox=sandbox)
    results = [play_expert(env, t, skill=1.0, seed=i).success for i, t in enumerate(he_test_sample)]
    env.close()
    assert len(results) >= 12 and all(results)


def test_low_skill_expert_mostly_fails_and_line_shift_keeps_tasks_solvable(sandbox):
    env = CodeRepairEnv(sandbox=sandbox)
    sloppy = [play_expert(env, t, skill=0.0, seed=0).success for t in env.tasks]
    env.close()
    assert sum(sloppy) <= len(sloppy) // 4
    shifted = CodeRepairEnv(sandbox=sandbox, perturbation="line_shift")
    obs, _ = shifted.reset(options={"task": "starter-dedupe"})
    assert "# note 0" in obs
    assert play_expert(shifted, shifted.tasks.get("starter-dedupe"), seed=1).success
    shifted.close()


def _write_tasks(tmp_path, rows):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _row(task_id, buggy, tests, **data):
    return {"id": task_id, "prompt": "fix it", "data": {"entry_point": "double", "buggy_code": buggy,
                                                        "tests": tests, **data}}


def test_user_task_file_with_check_source(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path / "cache"))
    check = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-1) == -2\n"
    path = _write_tasks(tmp_path, [_row("mine", "def double(x):\n    return x + 2\n", check,
                                        solution="def double(x):\n    return 2 * x\n", visible_tests=["t1"])])
    env = CodeRepairEnv(str(path), sandbox=sandbox)
    obs, _ = env.reset()
    assert "assert double(-1) == -2" in obs and "double(2) == 4" not in obs
    assert play_expert(env, seed=0).success
    env.close()


@pytest.mark.parametrize("buggy,tests,extra,reason", [
    ("def double(x):\n    return 2 * x\n", ["double(2) == 4"], {}, "already passes all 1 tests"),
    ("def double(x):\n    return x\n", ["double(2) == helper(2)"], {}, "tests do not run: line 1: unknown name 'helper'"),
    ("def double(x):\n    return x\n", ["double(2) == 4"], {"solution": "def double(x):\n    return x + 1\n"},
     "reference solution fails test t0"),
    ("def double(x):\n    return x\n", [], {}, "'data.tests' must be a non-empty list"),
    ("def double(x):\n    return x\n", ["double(2) == 4"], {"visible_tests": ["t7"]}, "unknown test ids ['t7']"),
])
def test_bad_tasks_are_rejected_at_load_with_id_and_reason(sandbox, tmp_path, monkeypatch, buggy, tests, extra, reason):
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path / "cache"))
    ok = _row("fine", "def double(x):\n    return x\n", ["double(3) == 6"])
    path = _write_tasks(tmp_path, [ok, _row("broken", buggy, tests, **extra)])
    with pytest.raises(TaskFileError) as excinfo:
        load_task_file(path, sandbox)
    message = str(excinfo.value)
    assert f"{path}:2" in message and "'broken'" in message and reason in message


@pytest.mark.slow
def test_expert_repairs_the_whole_humaneval_test_split(sandbox):
    """≥99 % of all HumanEval-derived test-split tasks (every level) repaired at skill 1.0."""
    ids = [p.task_id for p in load_problems() if problem_split(p.task_id) == "test"]
    tasks = humaneval_tasks(sandbox, problems=ids)
    assert tasks.splits() == ["test"] and tasks.levels() == [0, 1, 2, 3] and len(tasks) >= 80
    env = CodeRepairEnv(tasks, sandbox=sandbox)
    results = [play_expert(env, t, skill=1.0, seed=i).success for i, t in enumerate(tasks)]
    env.close()
    assert sum(results) / len(results) >= 0.99
