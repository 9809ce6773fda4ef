"""EnvPool on the thread and process backends (Ray: test_pool_ray.py)."""

from __future__ import annotations

import functools

import pytest
from pool_helpers import check_episodes_run, check_failure_isolated, check_task_option, drain

from agentic_rl.env.pool import EnvPool
from agentic_rl.env.registry import register, unregister
from agentic_rl.env.toys import ReverseEnv


@pytest.fixture(scope="module", autouse=True)
def runtime_id():
    register("pool-reverse-v0", ReverseEnv, "reverse env registered at run time")
    yield "pool-reverse-v0"
    unregister("pool-reverse-v0")


@pytest.mark.parametrize("backend", ["thread", "process"])
def test_episodes_run_on_every_slot(backend):
    with EnvPool(ReverseEnv, 4, backend=backend, num_workers=2) as pool:
        check_episodes_run(pool, 4)
        check_task_option(pool)


def test_runtime_registered_id_works_in_worker_processes():
    # The spec is resolved here and shipped to the workers, which never saw this register() call.
    with EnvPool("pool-reverse-v0", 2, backend="process", env_kwargs={"perturbation": "upper"}) as pool:
        pool.submit_reset(0, seed=1)
        assert drain(pool)[0].observation.split("'")[1].isupper()


@pytest.mark.parametrize(("fault", "expected"), [("raise", "crash:RuntimeError: FaultyEnv failed"),
                                                 ("hang", "timeout"), ("spin", "timeout")])
def test_thread_backend_isolates_a_failing_env(fault, expected):
    check_failure_isolated("thread", fault, expected, step_timeout_s=1.0)


@pytest.mark.parametrize(("fault", "expected"), [("raise", "crash:RuntimeError: FaultyEnv failed"),
                                                 ("hang", "timeout"), ("spin", "timeout")])
def test_process_backend_interrupts_a_hang_without_losing_the_worker(fault, expected):
    # One worker hosts all three slots: the hung step is interrupted inside it, the others go on.
    check_failure_isolated("process", fault, expected, step_timeout_s=1.0, num_workers=1)


def test_process_backend_survives_a_worker_that_dies():
    check_failure_isolated("process", "exit", "crash:WorkerDied", num_workers=3)


def test_process_worker_death_fails_only_the_slots_it_hosted():
    with EnvPool(functools.partial(_faulty, fault="exit"), 4, backend="process", num_workers=2) as pool:
        for slot in range(4):
            pool.submit_reset(slot, seed=slot)
        drain(pool)
        for slot in range(4):
            pool.submit_step(slot, "<answer>x</answer>")
        records = drain(pool)
    # slot 0 kills worker 0, which also hosted slot 2; worker 1 (slots 1, 3) is untouched
    assert records[0].error.startswith("crash:WorkerDied")
    assert records[2].error is not None
    assert records[1].error is None and records[3].error is None


def _faulty(**kwargs):
    from agentic_rl.env.toys import FaultyEnv

    return FaultyEnv(only_seed=0, **kwargs)


def test_failed_reset_is_a_record_too():
    with EnvPool(functools.partial(_faulty, fault="raise", on="reset"), 2, backend="thread") as pool:
        pool.submit_reset(0, seed=0)
        pool.submit_reset(1, seed=1)
        records = drain(pool)
    assert records[0].kind == "reset" and records[0].error.startswith("crash:RuntimeError")
    assert records[1].error is None


def test_step_before_any_reset_is_a_failed_record_not_an_exception():
    with EnvPool(ReverseEnv, 1) as pool:
        pool.submit_step(0, "<answer>x</answer>")
        record = drain(pool)[0]
    assert record.error.startswith("crash:EnvLost") and record.terminated


def test_call_returns_results_and_reraises_env_exceptions():
    with EnvPool(ReverseEnv, 1) as pool:
        pool.submit_reset(0, seed=0)
        drain(pool)
        assert pool.call(0, "expert_action", 1.0).startswith("<answer>")
        with pytest.raises(ValueError, match="public env method"):
            pool.call(0, "_step", None)
        with pytest.raises(AttributeError, match="no_such_method"):
            pool.call(0, "no_such_method")
        assert pool.pending == 0


def test_results_returns_at_once_when_nothing_is_pending():
    with EnvPool(ReverseEnv, 2) as pool:
        assert pool.results(timeout=None) == [] and pool.pending == 0


def test_bad_calls_raise_clear_errors():
    with EnvPool(ReverseEnv, 2) as pool:
        with pytest.raises(TypeError, match="action must be a str"):
            pool.submit_step(0, 42)
        with pytest.raises(IndexError, match=r"slot must be an integer in \[0, 2\)"):
            pool.submit_reset(2)
        pool.submit_reset(0, seed=0)
        with pytest.raises(RuntimeError, match="slot 0 already has a reset in flight"):
            pool.submit_step(0, "<answer>x</answer>")
        assert pool.pending == 1
        drain(pool)
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit_reset(0)
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        EnvPool(ReverseEnv, 1, backend="gpu")
    with pytest.raises(KeyError, match="Did you mean: tool-use-v0"):
        EnvPool("tool-use", 1)
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['colour'\]"):
        EnvPool("pool-reverse-v0", 1, env_kwargs={"colour": "red"})


def test_process_backend_rejects_an_env_fn_that_cannot_pickle():
    with pytest.raises(TypeError, match="must pickle"):
        EnvPool(lambda: ReverseEnv(), 1, backend="process")
