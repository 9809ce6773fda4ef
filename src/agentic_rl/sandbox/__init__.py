"""Kernel-level isolation for agent-written code and shell commands, with grading outside the sandbox.

Threat model
============
The adversary is the program an agent wrote (or a shell command it chose), possibly optimised by RL to
earn reward by any means. It runs as arbitrary native code inside the sandbox.

Covered (backend `bwrap`; see docs/sandbox.md for how each is enforced and tested):
- Host files: only /usr (and merged-/usr links), a few harmless /etc entries, synthetic passwd/group/hosts,
  the interpreter's install prefix (all read-only) and the per-execution workspace (read-write) are
  visible. /etc/shadow, /root, /home, the project, hidden tests and expected answers are not mounted.
  The sandbox's own root, /dev and /proc/sys are read-only; /tmp is a small private tmpfs.
- Kernel keyrings: each execution starts with a new, empty session keyring (never the host's).
- Network: a new network namespace with nothing in it: no outside address, no DNS, and not the host's
  loopback services.
- Processes: new PID, IPC, UTS, cgroup and user namespaces; all capabilities dropped; no nested user
  namespaces; a new session (no terminal injection). Signals such as `kill(-1, 9)` reach only the
  sandbox's own processes. When the sandbox's main process ends, or on the wall-clock deadline, every
  process it started (daemons included) is killed.
- Environment: cleared; the program never sees the host's variables (tokens, keys, paths).
- Resources: wall clock (watchdog outside), CPU seconds, memory of the whole tree and process count
  (cgroups where available), file size, open files, no core dumps (rlimits); stdout/stderr capped.
  Workspaces are size- and inode-limited tmpfs mounts where the host allows mounting (root).
- Grading: `run_calls` runs trusted calls in a fresh process whose harness lives outside the workspace;
  Python starts without `site` or environment variables, so planted `sitecustomize.py`/`.pth`/
  `conftest.py` files do nothing; return values cross the boundary only as exact builtin types, and
  expected values never enter the sandbox, so an always-equal object, an early `sys.exit`/`os._exit`,
  or a forged report cannot turn into a pass.

Not covered:
- Kernel exploits and hardware side channels: namespaces share the host kernel (no VM, no seccomp filter).
- Reading what is mounted read-only on purpose (/usr, the interpreter, the harness source, the call
  arguments of the current grading run).
- CPU contention: a sandbox can use its full CPU-time budget on any core; only wall time bounds it.
- Kernel key quota: keys a sandbox adds count against its uid's quota (root's when run as root) until the
  next execution drops its keyring; /proc/pressure triggers and other per-uid kernel quotas likewise.
- Without cgroups (no writable v1/v2 controllers), memory is limited per process (address space) and
  fork bombs only by the wall clock; without mount rights, workspaces are plain directories on the host
  disk (bounded per file, not in total).
- Backend `none` isolates nothing: it is a plain subprocess with rlimits, for trusted code only.
"""

from agentic_rl.sandbox.core import Sandbox, SandboxSession
from agentic_rl.sandbox.grading import Call, CallOutcome, run_calls, values_equal
from agentic_rl.sandbox.limits import ExecResult, Limits, SandboxError, SandboxUnavailable
from agentic_rl.sandbox.pool import SandboxPool

__all__ = [
    "Call",
    "CallOutcome",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxPool",
    "SandboxSession",
    "SandboxUnavailable",
    "run_calls",
    "values_equal",
]
