"""Fixtures for the sandbox tests: small limits, and a guard that the host is intact after each test."""

from __future__ import annotations

import os
import uuid

import psutil
import pytest

from agentic_rl.sandbox import Limits, Sandbox
from agentic_rl.sandbox.backends import bwrap_probe

BWRAP_PROBLEM = bwrap_probe()
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bwrap unavailable: {BWRAP_PROBLEM}")

# Small enough that limit cases end fast; large enough for a Python interpreter.
TEST_LIMITS = Limits(wall_time_s=2.0, cpu_time_s=2.0, memory_mb=128, max_processes=32, max_file_size_mb=4,
                     max_open_files=256, max_output_bytes=64 << 10, tmpfs_mb=8, workspace_mb=16,
                     max_workspace_files=2000)


def processes_with(marker: str) -> list[psutil.Process]:
    """Every process on the host whose command line mentions `marker` (ours excluded)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.info["pid"] != os.getpid() and marker in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def sandbox_mounts(base_dir) -> list[str]:
    with open("/proc/self/mountinfo") as handle:
        return [line for line in handle if str(base_dir) in line]


@pytest.fixture
def marker() -> str:
    """A unique token to put on a sandboxed program's command line (to find survivors later)."""
    return f"agentic-rl-test-{uuid.uuid4().hex}"


@pytest.fixture
def sandbox(tmp_path, marker):
    """A bwrap sandbox with small limits; afterwards checks that nothing of the test survived."""
    if BWRAP_PROBLEM is not None:
        pytest.skip(f"bwrap unavailable: {BWRAP_PROBLEM}")
    base = tmp_path / "sandboxes"
    base.mkdir()
    box = Sandbox(backend="bwrap", limits=TEST_LIMITS, base_dir=base)
    # other test modules may leave long-lived helpers (process-pool workers, Ray): only new children count
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield box
    survivors = processes_with(marker)
    for proc in survivors:
        proc.kill()
    assert not survivors, f"sandboxed processes survived: {[p.info for p in survivors]}"
    assert [p for p in psutil.Process().children(recursive=True) if p.pid not in before] == []
    leftovers = [p.name for p in base.iterdir() if not p.name.startswith("agentic-rl-sandbox-")]
    assert leftovers == [], f"workspaces left on the host: {leftovers}"
    assert sandbox_mounts(base) == []
    box.close()
