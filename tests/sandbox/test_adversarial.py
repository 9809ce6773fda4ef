"""Adversarial programs: each must end with its expected outcome, leaving host and siblings intact.

The `sandbox` fixture checks after every case that no process of the program survives (any process whose
command line carries the case's marker), no workspace or mount is left on the host.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import textwrap
import threading
import uuid

import pytest

from agentic_rl.sandbox import Call, ExecResult, run_calls
from agentic_rl.sandbox.workspace import _force_rmtree

FAST = {"wall_time_s": 1.0}  # programs expected to be stopped by the wall clock


def run_py(sandbox, code: str, marker: str, **limits) -> ExecResult:
    """Run `code` with `marker` on its command line (so survivors can be found on the host)."""
    argv = [sandbox.python, "-c", textwrap.dedent(code), marker]
    return sandbox.run(argv, limits=sandbox.limits.replace(**limits) if limits else None)


def timed_out(res, lim):
    assert res.timed_out and not res.ok, res


# (case id, program, limit overrides, check)
CASES = [
    ("infinite_loop", "while True: pass", FAST, timed_out),
    ("sleep_forever", "import time; time.sleep(10**6)", FAST, timed_out),
    ("cpu_bound_c_code", "x = 10**10**8", FAST, timed_out),
    ("ignore_sigterm_sigalrm", """
        import signal, time
        for s in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        signal.alarm(1)
        while True: time.sleep(0.01)
     """, FAST, timed_out),
    ("fork_bomb", """
        import os
        while True:
            try: os.fork()
            except OSError: pass
     """, FAST, timed_out),
    ("fork_bomb_posix", """
        import posix
        while True:
            try: posix.fork()
            except OSError: pass
     """, FAST, timed_out),
    ("cpu_time_limit", "while True: pass", {"cpu_time_s": 1.0, "wall_time_s": 4.0},
     lambda res, lim: (res.timed_out and res.signal == signal.SIGXCPU) or pytest.fail(str(res))),
    ("memory_bomb", "x = [bytearray(1 << 20) for _ in range(10_000)]", {},
     lambda res, lim: (not res.ok and (res.oom_killed or "MemoryError" in res.stderr)) or pytest.fail(str(res))),
    ("endless_stdout", """
        import sys
        while True: sys.stdout.write("x" * 65536)
     """, {}, lambda res, lim: (res.output_truncated and len(res.stdout) == lim.max_output_bytes
                           and not res.ok and not res.timed_out) or pytest.fail(repr(res)[:300])),
    ("one_huge_line", "print('y' * (4 * 65536))", {},
     lambda res, lim: (res.output_truncated and res.ok and set(res.stdout) == {"y"}
                  and len(res.stdout) == lim.max_output_bytes) or pytest.fail(repr(res)[:300])),
    ("endless_stderr", """
        import sys
        while True: sys.stderr.write("e" * 65536)
     """, {}, lambda res, lim: (res.output_truncated and len(res.stderr) == lim.max_output_bytes)
     or pytest.fail(repr(res)[:300])),
    ("invalid_utf8", "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe\\xc3(')", {},
     lambda res, lim: (res.ok and res.stdout.startswith("ok ") and "\ufffd" in res.stdout) or pytest.fail(str(res))),
    ("one_file_too_big", """
        with open("big", "wb") as f:
            while True: f.write(b"0" * (1 << 20))
     """, {}, lambda res, lim: (not res.ok and (res.signal == signal.SIGXFSZ or "File too large" in res.stderr))
     or pytest.fail(str(res))),
    ("disk_fill", """
        import os, errno
        i = 0
        try:
            while True:
                with open(f"f{i}", "wb") as f: f.write(b"0" * (3 << 20))
                i += 1
        except OSError as e:
            print(errno.errorcode[e.errno], i)
     """, {}, lambda res, lim: (res.ok and res.stdout.split()[0] in ("ENOSPC", "EFBIG")
                           and int(res.stdout.split()[1]) * 3 <= lim.workspace_mb)
     or pytest.fail(str(res))),
    ("million_files", """
        import os, errno
        i = 0
        try:
            while i < 1_000_000:
                open(f"n{i}", "w").close(); i += 1
        except OSError as e:
            print(errno.errorcode[e.errno], i)
     """, {}, lambda res, lim: (res.ok and res.stdout.split()[0] == "ENOSPC"
                           and int(res.stdout.split()[1]) <= lim.max_workspace_files)
     or pytest.fail(str(res))),
    ("many_open_files", """
        import errno
        files = []
        try:
            for _ in range(100_000): files.append(open("/dev/null"))
        except OSError as e:
            print(errno.errorcode[e.errno], len(files))
     """, {}, lambda res, lim: (res.ok and res.stdout.split()[0] == "EMFILE"
                           and int(res.stdout.split()[1]) < lim.max_open_files)
     or pytest.fail(str(res))),
    ("tmp_fill", """
        import errno
        try:
            with open("/tmp/fill", "wb") as f:
                for _ in range(100): f.write(b"0" * (1 << 20)); f.flush()
        except OSError as e:
            print(errno.errorcode[e.errno])
     """, {"max_file_size_mb": 64}, lambda res, lim: (res.ok and res.stdout.strip() == "ENOSPC") or pytest.fail(str(res))),
    ("tcp_outside", """
        import socket
        try:
            socket.create_connection(("1.1.1.1", 80), timeout=0.5); print("connected")
        except OSError as e:
            print("blocked", e)
     """, {}, lambda res, lim: (res.ok and res.stdout.startswith("blocked")) or pytest.fail(str(res))),
    ("dns_lookup", """
        import socket
        try:
            print("resolved", socket.getaddrinfo("example.com", 80))
        except OSError as e:
            print("blocked", e)
     """, {}, lambda res, lim: (res.ok and res.stdout.startswith("blocked")) or pytest.fail(str(res))),
    ("read_etc_shadow", """
        try: print(open("/etc/shadow").read())
        except OSError as e: print("denied", e.errno)
     """, {}, lambda res, lim: (res.ok and res.stdout.startswith("denied")) or pytest.fail(str(res))),
    ("nested_user_namespace", """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        print("unshared" if libc.unshare(0x10000000) == 0 else "denied")  # CLONE_NEWUSER
     """, {}, lambda res, lim: (res.ok and res.stdout.startswith("denied")) or pytest.fail(str(res))),
    ("kill_everything", """
        import os, time
        if os.fork() == 0:
            time.sleep(5); os._exit(0)
        os.kill(-1, 9)  # everything this process may signal: only its own sandbox's processes
        print("waited", os.wait()[1] == 9)
     """, {}, lambda res, lim: (res.ok and res.stdout == "waited True\n") or pytest.fail(str(res))),
    ("kill_parent", "import os; os.kill(os.getppid(), 9); print('still here')", {},
     lambda res, lim: res.stdout == "still here\n" or res.signal is not None or pytest.fail(str(res))),
    ("write_outside_workspace", """
        import os
        results = []
        for path in ("/etc/x", "/usr/x", "/x", "/root/x", "/proc/sys/kernel/x", "/dev/x"):
            try:
                open(path, "w").write("pwned"); results.append("wrote " + path)
            except OSError:
                results.append("denied")
        print(" ".join(results))
     """, {}, lambda res, lim: (res.ok and set(res.stdout.split()) == {"denied"}) or pytest.fail(str(res))),
    # kernel.core_pattern names a program the host kernel runs as root on every crash; sysctls check only
    # the writer's uid, so a sandbox started by root must find /proc/sys read-only. Opened, never written.
    ("write_host_sysctls", """
        import os
        for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/hostname"):
            try: os.close(os.open(path, os.O_WRONLY)); print("writable:" + path)
            except OSError: print("denied")
     """, {}, lambda res, lim: (res.ok and set(res.stdout.split()) == {"denied"}) or pytest.fail(str(res))),
]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_adversarial_program(sandbox, marker, case):
    _, code, limits, check = case
    res = run_py(sandbox, code, marker, **limits)
    check(res, sandbox.limits)


def test_many_processes_each_under_the_limit_hit_the_tree_limit(sandbox, marker):
    # 6 children x 40 MiB each stays under the per-process budget but not under the tree's 128 MiB.
    code = """
        import os, time
        pids = []
        for _ in range(6):
            pid = os.fork()
            if pid == 0:
                block = bytearray(40 << 20)
                for i in range(0, len(block), 4096): block[i] = 1
                time.sleep(0.3); os._exit(0)
            pids.append(pid)
        codes = [os.waitpid(p, 0)[1] for p in pids]
        print("all fine" if all(c == 0 for c in codes) else "some killed")
    """
    res = run_py(sandbox, code, marker, wall_time_s=6.0)
    if sandbox._cgroups is None:
        pytest.skip("no cgroups on this machine: memory is limited per process only")
    assert res.oom_killed or res.stdout.strip() == "some killed", res


def test_setsid_daemon_is_killed_with_the_sandbox(sandbox, marker):
    code = """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(30)
            os._exit(0)
        print("parent done")
    """
    res = run_py(sandbox, code, marker)
    assert res.ok and res.stdout == "parent done\n"
    # The fixture asserts no process carrying the marker is left anywhere on the host.


def test_loopback_service_of_the_host_is_unreachable(sandbox, marker):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    try:
        code = f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=0.5); print("connected")
            except OSError as e:
                print("blocked", e)
        """
        res = run_py(sandbox, code, marker)
        assert res.ok and res.stdout.startswith("blocked"), res
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_host_environment_variables_are_invisible(sandbox, marker, monkeypatch):
    secret = f"secret-{marker}"
    monkeypatch.setenv("AGENTIC_RL_TEST_SECRET", secret)
    code = """
        import os, glob
        seen = [repr(dict(os.environ))]
        for path in glob.glob("/proc/*/environ"):
            try: seen.append(open(path, "rb").read().decode(errors="replace"))
            except OSError: pass
        print("\\n".join(seen))
    """
    res = run_py(sandbox, code, marker)
    assert res.ok and "PATH" in res.stdout
    assert secret not in res.stdout
    assert "AGENTIC_RL_TEST_SECRET" not in res.stdout


def test_root_home_and_hidden_files_are_invisible(sandbox, marker, tmp_path):
    hidden = tmp_path / "hidden_tests.py"
    token = f"expected-answer-{marker[-8:]}"
    hidden.write_text(f"assert solve() == {token!r}\n")
    code = f"""
        import os
        found = []
        try: print("root:", sorted(os.listdir("/root")))
        except OSError: print("root: denied")
        try: open({str(hidden)!r}).read(); found.append("direct")
        except OSError: pass
        for top, dirs, files in os.walk("/"):
            # System and interpreter files are public by design (and large): search the rest.
            if top.startswith(("/proc", "/usr", "/sys", "/dev", {sandbox._python_prefix!r})):
                dirs[:] = []; continue
            for name in files:
                path = os.path.join(top, name)
                try:
                    if not os.path.islink(path) and {token!r} in open(path, errors="ignore").read(1 << 20):
                        found.append(top)
                except OSError: pass
        print("found:", found)
    """
    res = run_py(sandbox, code, marker, wall_time_s=5.0)
    assert res.ok, res
    assert "found: []" in res.stdout
    root_line = res.stdout.splitlines()[0]
    visible = set(eval(root_line.split(":", 1)[1])) if "denied" not in root_line else set()
    # At most the path leading to the interpreter's install prefix may show, nothing else of the host's /root.
    prefix_parts = sandbox._python_prefix.split("/")
    allowed = {prefix_parts[2]} if prefix_parts[1] == "root" else set()
    assert visible <= allowed, visible


def test_kill_all_does_not_reach_a_sibling_sandbox(sandbox, marker):
    import threading

    results = {}
    sibling = threading.Thread(target=lambda: results.setdefault("sibling", run_py(
        sandbox, "import time; time.sleep(0.6); print('sibling ok')", marker)))
    sibling.start()
    killer = run_py(sandbox, "import os, time; time.sleep(0.2); os.fork() or time.sleep(1); os.kill(-1, 9)",
                    marker)
    sibling.join()
    assert killer.exit_code in (0, None)
    assert results["sibling"].ok and results["sibling"].stdout == "sibling ok\n"


def test_sibling_session_files_are_out_of_reach(sandbox, marker):
    with sandbox.session() as first, sandbox.session() as second:
        first.write_file("mine.txt", "keep me")
        res = second.run([sandbox.python, "-c", textwrap.dedent(f"""
            import os, shutil
            for top in ("/workspace", "/tmp", {str(first.workspace)!r}, {str(first.workspace.parent)!r}):
                shutil.rmtree(top, ignore_errors=True)
            print(os.path.exists({str(first.workspace)!r}))
        """), marker])
        assert res.ok and res.stdout == "False\n", res
        assert first.read_file("mine.txt") == "keep me"


def test_planted_startup_files_do_not_affect_the_next_execution(sandbox, marker):
    with sandbox.session() as session:
        plant = textwrap.dedent("""
            import site, sys
            open("sitecustomize.py", "w").write("print('PWNED by sitecustomize')")
            open("usercustomize.py", "w").write("print('PWNED by usercustomize')")
            open("evil.pth", "w").write("import sys; print('PWNED by pth')")
            open("/tmp/sitecustomize.py", "w").write("print('PWNED from tmp')")
            print("planted")
        """)
        assert session.run([sandbox.python, "-c", plant, marker]).stdout == "planted\n"
        res = session.run_python("print('clean')")
        assert res.ok and res.stdout == "clean\n", res
        res = session.run(["python3", "-c", "print('clean')", marker])
        assert res.ok and "PWNED" not in res.stdout + res.stderr


def test_symlink_planted_in_workspace_is_not_followed_by_the_host(sandbox, marker):
    with sandbox.session() as session:
        session.run("ln -s /etc/hostname leak && ln -s /etc escape && echo " + marker)
        assert set(session.list_files()) >= {"leak", "escape"}
        with pytest.raises(ValueError):
            session.read_file("leak")
        with pytest.raises(ValueError):
            session.write_file("escape/owned", "x")
        assert not os.path.exists("/etc/owned")
        session.delete_file("leak")
        assert "leak" not in session.list_files() and os.path.exists("/etc/hostname")


def _must_return(function, unblock) -> None:
    """Run `function` in a thread; fail if it blocks (then `unblock()` until it returns, so the test ends).
    The wait is a hang detector, not a timing: fixed helpers return at once."""
    errors = []
    worker = threading.Thread(target=lambda: errors.extend(_raised(function)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    blocked = worker.is_alive()
    while worker.is_alive():
        unblock()
        worker.join(timeout=1)
    assert not blocked, "the host blocked on a file the sandboxed program planted"
    assert errors == [], errors


def _raised(function) -> list[BaseException]:
    try:
        function()
    except BaseException as exc:  # noqa: BLE001 - reported to the test thread
        return [exc]
    return []


def test_fifos_planted_in_the_workspace_do_not_block_the_host(sandbox, marker):
    with sandbox.session() as session:
        assert session.run(f"mkfifo notes solution.py && echo {marker}").ok
        seen = {}
        opened = []

        def use_helpers():
            seen["read_all"] = session.read_all()
            session.write_file("solution.py", "x = 1\n")  # replaces the FIFO with a regular file
            seen["written"] = session.read_file("solution.py")

        def unblock():  # an open for reading and writing completes the host's blocked open of a FIFO
            for name in ("notes", "solution.py"):
                try:
                    opened.append(os.open(session.workspace / name, os.O_RDWR | os.O_NONBLOCK))
                except OSError:
                    pass

        try:
            _must_return(use_helpers, unblock)
        finally:
            for fd in opened:
                os.close(fd)
        assert seen == {"read_all": {"notes": "\x00<unreadable>", "solution.py": "\x00<unreadable>"},
                        "written": "x = 1\n"}


def test_tampering_with_the_results_file_neither_hangs_nor_crashes_grading(sandbox):
    source = """
        import os
        RESULTS = "/run/agentic-rl/out/results.jsonl"
        with open(RESULTS, "a") as f:
            f.write("[" * 100_000 + "\\n")  # too deep for the host's JSON parser
        try:  # a directory (or FIFO) in its place would crash (or hang) the host's read
            os.unlink(RESULTS); os.mkdir(RESULTS)
        except OSError:
            pass
        def add(a, b): return a + b
    """
    calls = [Call("t1", "add", "(1, 2)"), Call("t2", "add", "('a', 'b')")]
    outcomes = run_calls(sandbox, "solution.py", calls, files={"solution.py": textwrap.dedent(source)})
    assert outcomes["t1"].matches(3) and outcomes["t2"].matches("ab"), outcomes


def test_deeply_nested_directories_do_not_break_the_host_helpers(sandbox, marker):
    # deeper than Python's recursion limit (os.walk and shutil.rmtree recurse per level before 3.12)
    nest = "import os\nfor _ in range(1500): os.mkdir('d'); os.chdir('d')\nopen('leaf', 'w').write('x')"
    with sandbox.session() as session:
        assert session.run([sandbox.python, "-c", nest, marker]).ok
        files = session.list_files()
        assert len(files) == 1 and files[0].endswith("d/leaf") and session.read_all() == {files[0]: "x"}
        session.delete_file("d")
        assert session.list_files() == [] and os.listdir(session.workspace) == []


def test_host_session_keyring_is_out_of_reach(sandbox, marker):
    if platform.machine() != "x86_64":
        pytest.skip("keyctl syscall numbers are spelled out for x86_64 only")
    keyctl, add_key, session_keyring = 250, 248, -3
    libc = ctypes.CDLL(None, use_errno=True)
    secret = f"token-{uuid.uuid4().hex}".encode()
    code = """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        key = libc.syscall(250, 10, -3, b"user", b"agentic-rl-test-secret", 0)  # KEYCTL_SEARCH
        buf = ctypes.create_string_buffer(256)
        size = libc.syscall(250, 11, key, buf, 256) if key > 0 else -1  # KEYCTL_READ
        print("read", buf.raw[:max(size, 0)])
    """
    seen = {}

    def host_thread():
        # This thread's own throwaway session keyring, so the test leaves nothing in the host's.
        if libc.syscall(keyctl, 1, None) < 0:  # KEYCTL_JOIN_SESSION_KEYRING
            return
        libc.syscall(add_key, b"user", b"agentic-rl-test-secret", secret, len(secret), session_keyring)
        seen["res"] = run_py(sandbox, code, marker)

    thread = threading.Thread(target=host_thread)
    thread.start()
    thread.join()
    if "res" not in seen:
        pytest.skip("keyrings are unavailable here (keyctl refused)")
    assert seen["res"].ok and seen["res"].stdout.startswith("read"), seen["res"]
    assert secret.decode() not in seen["res"].stdout


def test_workspace_cleanup_never_changes_modes_through_planted_symlinks(tmp_path, monkeypatch):
    host_file = tmp_path / "host_file"
    host_file.write_text("mine")
    host_file.chmod(0o600)
    workspace = tmp_path / "workspace"
    (workspace / "locked").mkdir(parents=True)
    (workspace / "locked" / "link").symlink_to(host_file)
    # As root nothing is refused; elsewhere a program's read-only directory makes the first unlink fail.
    real_unlink, refused = os.unlink, []

    def unlink_refused_once(path, *args, **kwargs):
        if os.fspath(path).endswith("link") and not refused:
            refused.append(path)
            raise PermissionError(13, "Permission denied", path)
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink_refused_once)
    _force_rmtree(workspace)
    assert refused and not workspace.exists()
    assert (host_file.stat().st_mode & 0o777) == 0o600
