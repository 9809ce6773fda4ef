"""shell-v0: generated trees, every task kind and level, perturbations, state checks, limits, contract."""

import json
import warnings

import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from agentic_rl.agent.actions import answer, command
from agentic_rl.env import make
from agentic_rl.envs import shell_tasks
from agentic_rl.envs.experts import play_expert
from agentic_rl.envs.shell import ShellEnv
from agentic_rl.sandbox import Limits, Sandbox, SandboxSession
from agentic_rl.tasks.core import Task, TaskFileError, TaskSet


@pytest.fixture(scope="module")
def sandbox():
    return Sandbox()


@pytest.fixture(scope="module")
def env(sandbox):
    env = ShellEnv(sandbox=sandbox)
    yield env
    env.close()


def first_of_kind(env, kind):
    return next(t for t in env.tasks if t.data["kind"] == kind)


def test_task_set_covers_four_levels_and_both_splits():
    tasks = shell_tasks.shell_tasks(per_kind=4)
    assert tasks.levels() == [0, 1, 2, 3] and tasks.splits() == ["test", "train"]
    assert {t.data["kind"] for t in tasks} == set(shell_tasks.KINDS)
    # generation is deterministic, and different seeds give different trees
    assert shell_tasks.build_world(5).files == shell_tasks.build_world(5).files
    assert shell_tasks.build_world(5).files != shell_tasks.build_world(6).files


def test_answers_are_computed_from_the_tree():
    world = shell_tasks.build_world(11)
    log = world.files["logs/app.log"].splitlines()
    question = shell_tasks.pose("count_level", world)
    assert int(question.answer) == sum(1 for line in log if line.split()[2] == world.log_level)
    largest = shell_tasks.pose("largest_file", world).answer
    assert all(len(t) <= len(world.files[largest]) for p, t in world.files.items() if p.startswith("data/"))


@pytest.mark.parametrize("kind", shell_tasks.KINDS)
def test_expert_solves_every_kind_by_running_real_commands(env, kind):
    traj = play_expert(env, first_of_kind(env, kind), skill=1.0, seed=0)
    assert traj.success and traj.turns[-1].reward == 1.0
    commands = [t for t in traj.turns if t.action.startswith("<action>")]
    assert commands and all(t.info["exit_code"] == 0 for t in commands)


@pytest.mark.parametrize("perturbation", shell_tasks.PERTURBATIONS)
def test_perturbations_keep_tasks_solvable_and_change_the_tree(sandbox, perturbation):
    env = ShellEnv(sandbox=sandbox, perturbation=perturbation)
    kinds = ("count_level", "largest_file", "shared_port", "move_tmp")
    assert all(play_expert(env, first_of_kind(env, k), seed=0).success for k in kinds)
    env.close()
    plain, changed = shell_tasks.build_world(3), shell_tasks.build_world(3, perturbation)
    assert plain.files != changed.files
    if perturbation == "renamed_folders":
        assert "var/log/app.log" in changed.files and "logs/app.log" not in changed.files


def test_wrong_answers_fail_and_numbers_compare_by_value(env):
    task = first_of_kind(env, "count_files")
    env.reset(options={"task": task})
    expected = env.question.answer
    _, reward, terminated, _, info = env.step(answer(f" {expected}. "))
    assert terminated and info["success"] and reward == 1.0
    env.reset(options={"task": task})
    _, reward, terminated, _, info = env.step(answer(str(int(expected) + 1)))
    assert terminated and not info["success"] and reward == 0.0


def test_state_task_is_judged_on_the_final_workspace(env):
    task = first_of_kind(env, "move_tmp")
    env.reset(options={"task": task})
    _, reward, _, _, info = env.step(answer("done"))  # claims done without doing it
    assert not info["success"] and reward == 0.0
    env.reset(options={"task": task})
    env.step(command("mv *.tmp trash/ 2>/dev/null; true"))  # only the top level: nested .tmp files remain
    assert not env.step(answer("done"))[4]["success"]
    env.reset(options={"task": task})
    env.step(command("find . -name '*.tmp' -not -path './trash/*' -exec mv {} trash/ \\;"))
    env.step(command("rm notes/todo.txt"))  # collateral damage is not allowed
    assert not env.step(answer("done"))[4]["success"]


def test_state_task_finished_when_the_budget_runs_out_still_counts(sandbox):
    env = ShellEnv(sandbox=sandbox, max_steps=2)
    env.reset(options={"task": first_of_kind(env, "rename_ext")})
    env.step(command(env.question.expert_commands[0]))
    obs, reward, terminated, truncated, info = env.step(command("ls notes"))
    env.close()
    assert truncated and not terminated and info["success"] and reward == 1.0
    assert "Step budget exhausted. The workspace is in the requested state." in obs


def test_commands_see_truncated_output_errors_and_timeouts(sandbox):
    env = ShellEnv(sandbox=sandbox, limits=Limits(wall_time_s=1.0), max_output_chars=200)
    env.reset(seed=0)
    obs, _, _, _, info = env.step(command("seq 1 10000"))
    assert obs.startswith("$ seq 1 10000\n1\n2\n") and "more chars]" in obs and len(obs) < 400
    obs, _, _, _, info = env.step(command("cat missing.txt"))
    assert "[stderr]" in obs and "No such file" in obs and "[exit code 1]" in obs and info["exit_code"] == 1
    obs, _, _, _, info = env.step(command("sleep 30"))
    assert info["error"] == "timeout" and "longer than 1 s" in obs
    obs, *_ = env.step(command("ping -c1 -W1 8.8.8.8 || curl -s --max-time 1 http://example.com || echo offline"))
    assert "offline" in obs  # no network in the sandbox
    for unrunnable in ("echo \x00", "echo \ud800", "x" * 20_000):
        obs, reward, _, _, info = env.step(command(unrunnable))
        assert info["error"] == "invalid_action" and reward < 0
    env.close()


def test_garbage_never_touches_the_sandbox_and_budget_truncates(sandbox, monkeypatch):
    calls = []
    original = SandboxSession.execute
    monkeypatch.setattr(SandboxSession, "execute", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    env = ShellEnv(sandbox=sandbox, max_steps=10)
    env.reset(seed=1)
    env.action_space.seed(1)
    ends = 0
    for _ in range(300):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert info["error"] == "parse_error" and sum(info["reward_terms"].values()) == pytest.approx(reward)
        if terminated or truncated:
            assert truncated and "Step budget exhausted" in obs
            ends += 1
            env.reset()
    env.close()
    assert calls == [] and ends == 30


def test_contract_gymnasium_checker_registry_and_state(sandbox):
    env = ShellEnv(sandbox=sandbox)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(env)
    obs1, _ = env.reset(seed=4)
    obs2, _ = env.reset(seed=4)
    assert obs1 == obs2
    json.dumps(env.state())
    with pytest.raises(TypeError):
        env.step(None)
    env.close()
    made = make("shell-v0", sandbox=sandbox, split="test", levels=[3])
    _, info = made.reset(seed=0)
    assert made.unwrapped.task.difficulty == 3 and made.unwrapped.task.split == "test"
    made.close()


def test_invasive_checker_when_available(sandbox):
    checker = pytest.importorskip("agentic_rl.env.checker")
    if not hasattr(checker, "check_env"):
        pytest.skip("agentic_rl.env.checker.check_env not available yet")
    # well-formed random commands do run (≈50 ms each), so the random part is kept short here
    report = checker.check_env(ShellEnv(sandbox=sandbox), n_random_actions=150)
    assert report.ok, report.format()


def test_low_skill_expert_makes_mistakes(sandbox):
    env = ShellEnv(sandbox=sandbox)
    tasks = [first_of_kind(env, k) for k in shell_tasks.KINDS]
    assert sum(play_expert(env, t, skill=0.0, seed=0).success for t in tasks) == 0
    env.close()


def test_custom_tree_tasks_and_bad_task_data(sandbox):
    custom = Task("mine", "How many lines are in a.txt?", {"files": {"a.txt": "x\ny\nz\n"}, "answer": "3",
                                                              "answer_kind": "int"})
    env = ShellEnv(TaskSet([custom]), sandbox=sandbox)
    env.reset()
    obs, *_ = env.step(command("wc -l < a.txt"))
    assert obs.endswith("3")
    assert env.step(answer("3"))[4]["success"]
    env.close()
    with pytest.raises(TaskFileError, match=r"\[bad\]: 'data\.kind' must be one of .*got 'nope'"):
        ShellEnv(TaskSet([Task("bad", "p", {"kind": "nope", "seed": 1})]), sandbox=sandbox)
