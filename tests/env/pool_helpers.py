"""Shared scenarios for the EnvPool tests of every backend."""

from __future__ import annotations

from agentic_rl.agent.actions import answer, tool_call
from agentic_rl.env.pool import EnvPool, StepRecord
from agentic_rl.env.toys import FaultyEnv, ReverseEnv, reverse_tasks


def drain(pool: EnvPool, timeout: float = 30.0) -> dict[int, StepRecord]:
    """Collect every pending record, by slot."""
    out: dict[int, StepRecord] = {}
    while pool.pending:
        records = pool.results(timeout=timeout)
        assert records, "results() returned nothing before its timeout while requests were pending"
        for record in records:
            assert record.slot not in out, f"two records for slot {record.slot}"
            out[record.slot] = record
    return out


def right_answer(observation: str) -> str:
    word = observation.split("'")[1]
    return answer(word[::-1])


def check_episodes_run(pool: EnvPool, n: int) -> None:
    """Every slot plays a full episode; records carry the env's real observations and rewards."""
    for slot in range(n):
        pool.submit_reset(slot, seed=slot)
    resets = drain(pool)
    assert sorted(resets) == list(range(n))
    assert all(r.kind == "reset" and r.error is None and "Reverse the word" in r.observation for r in resets.values())
    for slot, record in resets.items():
        pool.submit_step(slot, tool_call("hint") if slot % 2 else right_answer(record.observation))
    steps = drain(pool)
    for slot, record in steps.items():
        if slot % 2:
            assert record.reward == -0.05 and not record.terminated and "starts with" in record.observation
        else:
            assert record.reward == 1.0 and record.terminated and record.info["success"] is True
    assert pool.call(1, "state")["hints"] == 1
    assert "hint" in pool.call(0, "system_prompt")


def check_failure_isolated(backend: str, fault: str, expected_error: str, **pool_kwargs) -> None:
    """Slot 0's env fails on its first step; slots 1 and 2 step normally; slot 0 recovers at reset."""
    kwargs = {"fault": fault, "only_seed": 0, "hang_s": 60.0}
    with EnvPool(FaultyEnv, 3, backend=backend, env_kwargs=kwargs, **pool_kwargs) as pool:
        for slot in range(3):
            pool.submit_reset(slot, seed=slot)
        resets = drain(pool)
        for slot in range(3):
            pool.submit_step(slot, right_answer(resets[slot].observation))
        steps = drain(pool)
        failed = steps[0]
        assert failed.error is not None and failed.error.startswith(expected_error), failed.error
        assert failed.terminated and failed.info["error"] in ("timeout", "env_error")
        assert failed.info["success"] is False
        for slot in (1, 2):
            assert steps[slot].error is None and steps[slot].reward == 1.0, steps[slot]
        # the failed slot gets a fresh env at its next reset, and works again
        pool.submit_reset(0, seed=5)
        record = drain(pool)[0]
        assert record.error is None and "Reverse the word" in record.observation
        pool.submit_step(0, right_answer(record.observation))
        assert drain(pool)[0].reward == 1.0
        assert pool.call(0, "state")["steps"] == 1


def check_task_option(pool: EnvPool) -> None:
    """A Task object in reset options reaches the env (pickled, for process/ray backends)."""
    task = reverse_tasks()[3]
    pool.submit_reset(0, seed=0, options={"task": task})
    record = drain(pool)[0]
    assert record.info["task_id"] == task.id and task.data["word"] in record.observation


__all__ = ["ReverseEnv", "check_episodes_run", "check_failure_isolated", "check_task_option", "drain"]
