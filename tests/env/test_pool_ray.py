"""EnvPool on the Ray backend: each env is a Ray actor. One local Ray instance for the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from pool_helpers import check_episodes_run, check_failure_isolated, check_task_option

from agentic_rl.env.pool import EnvPool
from agentic_rl.env.toys import ReverseEnv

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'agentic-rl[ray]')")
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield context
    ray.shutdown()


def test_episodes_run_on_ray_actors():
    with EnvPool(ReverseEnv, 3, backend="ray") as pool:
        check_episodes_run(pool, 3)
        check_task_option(pool)


@pytest.mark.parametrize(("fault", "expected"), [("raise", "crash:RuntimeError: FaultyEnv failed"),
                                                 ("hang", "timeout"), ("exit", "crash:ActorDied")])
def test_ray_backend_isolates_a_failing_actor(fault, expected):
    check_failure_isolated("ray", fault, expected, step_timeout_s=1.0)


def test_pool_connects_to_a_cluster_by_address(local_ray):
    # A separate driver process, where Ray is not initialised, joins the running instance by address.
    script = textwrap.dedent(f"""
        import json
        from agentic_rl.env.pool import EnvPool
        from agentic_rl.env.toys import ReverseEnv
        with EnvPool(ReverseEnv, 1, backend="ray", ray_address={local_ray.address_info["address"]!r}) as pool:
            pool.submit_reset(0, seed=3)
            (record,) = pool.results(timeout=60)
            print(json.dumps({{"error": record.error, "observation": record.observation}}))
    """)
    env = {**os.environ, "RAY_ADDRESS": ""}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["error"] is None and "Reverse the word" in result["observation"]
