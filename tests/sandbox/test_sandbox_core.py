"""Sandbox API: result fields, sessions, backends, limits and the pool."""

from __future__ import annotations

import logging
import signal
import threading

import pytest

from agentic_rl.sandbox import (
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxPool,
    SandboxUnavailable,
    backends,
)


def test_result_fields_report_exit_status_streams_and_memory(sandbox):
    res = sandbox.run("read line; echo out:$line; echo err >&2; exit 3", stdin="hello\n")
    assert (res.exit_code, res.signal, res.timed_out, res.oom_killed) == (3, None, False, False)
    assert res.stdout == "out:hello\n" and res.stderr == "err\n" and not res.ok
    assert res.backend == "bwrap" and res.wall_time_s > 0
    if sandbox._cgroups is not None:
        assert res.peak_memory_mb is not None and 0 < res.peak_memory_mb < sandbox.limits.memory_mb
    killed = sandbox.run_python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert killed.exit_code is None and killed.signal == signal.SIGTERM and not killed.ok
    assert sandbox.run(["true"]).ok
    assert "exit 3" in res.summary()


def test_binary_stdin_and_large_input_reach_the_program(sandbox):
    data = bytes(range(256)) * 1000
    res = sandbox.run_python("import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
                             stdin=data)
    import hashlib

    assert res.stdout.strip() == hashlib.sha256(data).hexdigest()


def test_files_are_written_into_a_fresh_workspace_each_run(sandbox):
    res = sandbox.run(["cat", "data/in.txt"], files={"data/in.txt": "payload", "b.bin": b"\x00"})
    assert res.ok and res.stdout == "payload"
    assert sandbox.run("ls -A /workspace").stdout == ""


def test_session_keeps_files_between_commands_and_is_destroyed_on_close(sandbox):
    with sandbox.session() as session:
        session.write_file("solution.py", "def f():\n    return 1\n")
        assert session.run("sed -i 's/return 1/return 2/' solution.py && touch made_inside").ok
        assert "return 2" in session.read_file("solution.py")
        assert session.list_files() == ["made_inside", "solution.py"]
        res = session.run_python("from solution import f; print(f())")
        assert res.stdout == "2\n", res
        session.delete_file("made_inside")
        assert session.list_files() == ["solution.py"]
        with pytest.raises(ValueError):
            session.write_file("../escape.txt", "x")
        with pytest.raises(FileNotFoundError):
            session.read_file("missing.txt")
        workspace = session.workspace
    assert not workspace.exists()
    with pytest.raises(SandboxError):
        session.run("true")


def test_long_python_source_is_passed_as_a_file(sandbox):
    code = "values = []\n" + "values.append(1)\n" * 20_000 + "print(len(values))"
    res = sandbox.run_python(code)
    assert res.ok and res.stdout == "20000\n", res


def test_limits_reject_nonsense_values_naming_the_field():
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=0)
    with pytest.raises(ValueError, match="wall_time_s"):
        Limits().replace(wall_time_s=-1)


def test_auto_refuses_to_run_without_bwrap_and_says_how_to_fix_it(monkeypatch):
    monkeypatch.setattr(backends, "bwrap_probe", lambda: "bubblewrap (`bwrap`) is not installed")
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap.*backend='none'"):
        Sandbox(backend="auto")
    with pytest.raises(ValueError, match="backend"):
        Sandbox(backend="docker")


def test_none_backend_is_explicit_and_warns(tmp_path, caplog):
    backends._warn_none_once.cache_clear()
    with caplog.at_level(logging.WARNING):
        box = Sandbox(backend="none", limits=Limits(wall_time_s=5), base_dir=tmp_path)
    assert "trust" in caplog.text
    with box.session() as session:
        session.write_file("x.txt", "hi")
        res = session.run("cat x.txt; exit 4")
        assert (res.stdout, res.exit_code, res.backend) == ("hi", 4, "none")
        timed = session.run_python("while True: pass", limits=Limits(wall_time_s=0.5))
        assert timed.timed_out and timed.signal == signal.SIGKILL
    box.close()


def test_pool_keeps_order_and_bounds_concurrency(sandbox, monkeypatch):
    results = SandboxPool(sandbox, max_concurrency=2).map(
        ["echo a", ["echo", "b"], {"code": "print('c')"}, {"argv": "cat f", "files": {"f": "d"}}])
    assert [r.stdout.strip() for r in results] == ["a", "b", "c", "d"]

    active, peak, lock = [0], [0], threading.Lock()
    original = Sandbox.execute

    def counting_execute(self, *args, **kwargs):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            return original(self, *args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(Sandbox, "execute", counting_execute)
    pool = SandboxPool(sandbox, max_concurrency=2)
    outputs = pool.map([f"sleep 0.1; echo {i}" for i in range(6)])
    assert [r.stdout.strip() for r in outputs] == [str(i) for i in range(6)]
    assert peak[0] == 2
    with pool.session() as session:
        assert session.run("echo s").stdout == "s\n"


def test_exec_result_ok_requires_clean_exit():
    base = dict(signal=None, output_truncated=False, stdout="", stderr="", wall_time_s=0.1,
                peak_memory_mb=None, backend="bwrap")
    assert ExecResult(exit_code=0, timed_out=False, oom_killed=False, **base).ok
    assert not ExecResult(exit_code=0, timed_out=True, oom_killed=False, **base).ok
    assert not ExecResult(exit_code=0, timed_out=False, oom_killed=True, **base).ok
    assert not ExecResult(exit_code=1, timed_out=False, oom_killed=False, **base).ok
