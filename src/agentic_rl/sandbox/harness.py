"""Trusted grading harness, run INSIDE the sandbox as a script (stdlib only; never imported by the host).

Usage: python -E -s -S -B harness.py WORKSPACE MODULE_FILE RESULTS_FILE CALL_TIMEOUT_S < calls.json

Reads every call first, evaluates every argument tuple before any agent code runs, imports the agent's
module from the workspace (appended to the END of sys.path, so it cannot shadow the standard library),
then runs each call under a re-firing timer and appends one JSON line per call to RESULTS_FILE right
away. It ends with os._exit so agent-registered atexit hooks never run. It decides nothing: the values
are compared with the expectations outside the sandbox.
"""

import builtins
import importlib.util
import json
import os
import signal
import sys

import _agentic_codec as codec  # copied next to this file by the host

_MAX_RECORD = 1 << 20


class _CallTimeout(BaseException):
    """Raised by the timer; a BaseException so `except Exception` in agent code does not swallow it."""


def _on_timer(signum, frame):
    raise _CallTimeout()


def _describe(exc):
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:  # agent-defined __str__ may raise anything
        text = "<exception that cannot be printed>"
    return text[:1000]


def _emit(fd, record):
    line = json.dumps(record, ensure_ascii=True, separators=(",", ":"))
    if len(line) > _MAX_RECORD:
        line = json.dumps({"id": record["id"], "status": "unserialisable", "error": "value too large"})
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass


def _run_one(func, args, timeout_s):
    # The timer re-fires every 50 ms until cleared, so code that swallows one timeout meets the next.
    signal.setitimer(signal.ITIMER_REAL, timeout_s, 0.05)
    try:
        try:
            value = func(*args)
            return {"status": "ok", "value": codec.encode(value)}
        except codec.Unserialisable as exc:
            return {"status": "unserialisable", "error": str(exc)[:1000]}
        except _CallTimeout:
            return {"status": "timeout", "error": f"call exceeded {timeout_s} s"}
        except RecursionError as exc:
            return {"status": "exception", "error": _describe(exc)}
        except BaseException as exc:
            return {"status": "exception", "error": _describe(exc)}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _CallTimeout:  # fired between the call's end and the timer being cleared
        return {"status": "timeout", "error": f"call exceeded {timeout_s} s"}


def main():
    workspace, module_file, results_file, timeout_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    calls = json.loads(sys.stdin.read())
    out = os.open(results_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too-large writes fail with EFBIG instead of killing us
    signal.signal(signal.SIGALRM, _on_timer)
    prepared = []
    for call in calls:
        try:
            args = eval(compile(call["args"], "<args>", "eval"), {"__builtins__": builtins})
            prepared.append((call, args if type(args) is tuple else (args,), None))
        except BaseException as exc:
            prepared.append((call, None, "bad arguments: " + _describe(exc)))

    sys.dont_write_bytecode = True
    sys.path.append(workspace)
    os.chdir(workspace)
    stem = os.path.splitext(os.path.basename(module_file))[0]
    name = stem if stem.isidentifier() else "agent_module"
    module, import_error = None, None
    signal.setitimer(signal.ITIMER_REAL, timeout_s, 0.05)
    try:
        try:
            spec = importlib.util.spec_from_file_location(name, os.path.join(workspace, module_file))
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except BaseException as exc:
            import_error = "module failed to import: " + _describe(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _CallTimeout:
        import_error = "module import exceeded the time limit"

    for call, args, error in prepared:
        if error is None and import_error is not None:
            error = import_error
        if error is not None:
            _emit(out, {"id": call["id"], "status": "exception", "error": error})
            continue
        try:
            func = getattr(module, call["function"])
        except BaseException as exc:
            _emit(out, {"id": call["id"], "status": "exception", "error": "no such function: " + _describe(exc)})
            continue
        _emit(out, {"id": call["id"], **_run_one(func, args, timeout_s)})
    os._exit(0)


if __name__ == "__main__":
    main()
