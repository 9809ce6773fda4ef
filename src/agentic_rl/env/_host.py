"""What runs next to the envs in every :class:`~agentic_rl.env.pool.EnvPool` backend.

An :class:`EnvHost` owns the env instances of the slots placed on one worker (a thread, a process or a
Ray actor), builds them lazily, and turns each request into a :class:`StepRecord`: an env that raises
yields a record with ``error="crash:<Type>: <message>"`` instead of an exception, and the env is dropped
so that the slot's next reset builds a fresh one. The same code runs in-process and in workers, so the
three backends agree on what a failure looks like.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Length limit on the exception text kept in a crash record (the full text can be megabytes).
_MAX_ERROR_CHARS = 500


@dataclass
class StepRecord:
    """The outcome of one ``reset`` or ``step`` request on one pool slot.

    ``error`` is ``None`` for a normal result, ``"timeout"`` when the env did not answer within the pool's
    ``step_timeout_s``, or ``"crash:<ExceptionType>: <message>"`` when it raised or its worker died. A record
    with an error always has ``terminated=True``, ``reward=0.0`` and ``info["error"]`` set to ``"timeout"``
    or ``"env_error"``; the slot's env is rebuilt at the slot's next reset. ``elapsed_s`` is the wall time
    the env call took (for a timeout: the time waited).
    """

    slot: int
    kind: str
    observation: str = ""
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    elapsed_s: float = 0.0

    @classmethod
    def failure(cls, slot: int, kind: str, error: str, elapsed_s: float = 0.0) -> StepRecord:
        """A failed request: ``error`` is ``"timeout"`` or ``"crash:..."``."""
        info_error = "timeout" if error == "timeout" else "env_error"
        text = "the environment timed out" if error == "timeout" else f"the environment failed ({error})"
        info = {"error": info_error, "success": False, "reward_terms": {}, "pool_error": error}
        return cls(slot, kind, f"Error: {text}", 0.0, True, False, info, error, elapsed_s)


def crash_text(exc: BaseException) -> str:
    """``"crash:<Type>: <message>"`` with the message shortened to a readable length."""
    message = str(exc)
    if len(message) > _MAX_ERROR_CHARS:
        message = message[: _MAX_ERROR_CHARS - 3] + "..."
    return f"crash:{type(exc).__name__}: {message}"


class StepTimedOut(BaseException):
    """Raised inside a worker process when a request outlives its time limit.

    A ``BaseException`` so that an env's own ``except Exception`` cannot swallow it.
    """


class EnvHost:
    """Builds and drives the envs of the slots placed on one worker.

    ``factory()`` builds one env. ``time_limit_s`` is enforced here only where a signal can interrupt the
    env (the main thread of a worker process); elsewhere the pool enforces it from outside.
    """

    def __init__(self, factory: Callable[[], Any], time_limit_s: float | None = None):
        self.factory = factory
        self.envs: dict[int, Any] = {}
        self.use_alarm = (
            time_limit_s is not None
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )
        self.time_limit_s = time_limit_s
        if self.use_alarm:
            signal.signal(signal.SIGALRM, _raise_timed_out)

    def handle(self, slot: int, kind: str, payload: tuple) -> Any:
        """Run one request. reset/step return a :class:`StepRecord`; call returns ``("ok", value)`` or
        ``("error", exception)``. Never raises for anything the env does."""
        if kind == "call":
            return self._call(slot, *payload)
        start = time.perf_counter()
        try:
            with self._alarm():
                if kind == "reset":
                    record = self._reset(slot, *payload)
                else:
                    record = self._step(slot, *payload)
        except StepTimedOut:
            self.drop(slot)
            return StepRecord.failure(slot, kind, "timeout", time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - any env failure becomes a record
            self.drop(slot)
            return StepRecord.failure(slot, kind, crash_text(exc), time.perf_counter() - start)
        record.elapsed_s = time.perf_counter() - start
        return record

    def drop(self, slot: int) -> None:
        """Forget the slot's env (closing it, best effort); the next reset builds a new one."""
        env = self.envs.pop(slot, None)
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - a broken env may not close cleanly; it is discarded anyway
                pass

    def close(self) -> None:
        for slot in list(self.envs):
            self.drop(slot)

    # -- requests ------------------------------------------------------------------------------
    def _reset(self, slot: int, seed: int | None, options: dict | None) -> StepRecord:
        env = self.envs.get(slot)
        if env is None:
            env = self.envs[slot] = self.factory()
        observation, info = env.reset(seed=seed, options=options)
        return StepRecord(slot, "reset", observation, 0.0, False, False, dict(info))

    def _step(self, slot: int, action: str) -> StepRecord:
        env = self.envs.get(slot)
        if env is None:
            return StepRecord.failure(slot, "step", "crash:EnvLost: the slot has no env; call submit_reset first")
        observation, reward, terminated, truncated, info = env.step(action)
        return StepRecord(slot, "step", observation, float(reward), bool(terminated), bool(truncated), dict(info))

    def _call(self, slot: int, method: str, args: tuple, kwargs: dict) -> tuple[str, Any]:
        env = self.envs.get(slot)
        if env is None:
            return "error", RuntimeError(f"slot {slot} has no env yet; call submit_reset first")
        try:
            with self._alarm():
                return "ok", getattr(env, method)(*args, **kwargs)
        except StepTimedOut:
            self.drop(slot)
            return "error", TimeoutError(f"slot {slot}: {method}() timed out after {self.time_limit_s} s")
        except Exception as exc:  # noqa: BLE001 - handed back to the caller of EnvPool.call
            return "error", exc

    def _alarm(self) -> _Alarm:
        return _Alarm(self.time_limit_s if self.use_alarm else None)


class _Alarm:
    """Arms SIGALRM for the duration of a ``with`` block (no-op when ``seconds`` is None)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds

    def __enter__(self) -> None:
        if self.seconds is not None:
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc: object) -> None:
        if self.seconds is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)


def _raise_timed_out(signum: int, frame: object) -> None:
    raise StepTimedOut()
