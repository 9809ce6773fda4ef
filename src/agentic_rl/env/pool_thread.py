"""The ``thread`` backend of :class:`~agentic_rl.env.pool.EnvPool`: one daemon thread per slot.

A thread cannot be killed. When a request outlives the step timeout the pool answers it with a timeout
record, abandons the thread (asking it to stop with an asynchronous exception, which ends a busy Python
loop but not a blocking system call) and gives the slot a new thread and a new env at its next request.
The threads are daemons, so a hung env never blocks interpreter exit.
"""

from __future__ import annotations

import ctypes
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from agentic_rl.env._host import EnvHost, StepRecord, StepTimedOut

_STOP = None


class _SlotThread:
    def __init__(self, slot: int, factory: Callable[[], Any], out: queue.Queue):
        self.inbox: queue.Queue = queue.Queue()
        self.host = EnvHost(factory)
        self.thread = threading.Thread(target=self._run, args=(out,), name=f"envpool-slot-{slot}", daemon=True)
        self.thread.start()

    def _run(self, out: queue.Queue) -> None:
        try:
            while (request := self.inbox.get()) is not _STOP:
                req_id, slot, kind, payload = request
                out.put((req_id, self.host.handle(slot, kind, payload)))
        except BaseException:  # noqa: BLE001 - an abandoned thread interrupted on purpose just ends
            pass
        finally:
            self.host.close()

    def abandon(self) -> None:
        """Ask the thread to end: stop after its current request, and interrupt that request."""
        self.inbox.put(_STOP)
        ident = self.thread.ident
        if ident is not None and self.thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(StepTimedOut))


class ThreadBackend:
    """Runs each slot's env in its own thread; the pool's step timeout is enforced from here."""

    def __init__(self, factory: Callable[[], Any], step_timeout_s: float | None):
        self.factory = factory
        self.step_timeout_s = step_timeout_s
        self.out: queue.Queue = queue.Queue()
        self.threads: dict[int, _SlotThread] = {}
        # req_id -> (slot, kind, deadline or None, start)
        self.inflight: dict[int, tuple[int, str, float | None, float]] = {}

    def send(self, req_id: int, slot: int, kind: str, payload: tuple) -> None:
        worker = self.threads.get(slot)
        if worker is None:
            worker = self.threads[slot] = _SlotThread(slot, self.factory, self.out)
        now = time.monotonic()
        deadline = None if self.step_timeout_s is None else now + self.step_timeout_s
        self.inflight[req_id] = (slot, kind, deadline, now)
        worker.inbox.put((req_id, slot, kind, payload))

    def poll(self, timeout: float | None) -> list[tuple[int, Any]]:
        wait = self._wait_time(timeout)
        replies: list[tuple[int, Any]] = []
        try:
            replies.append(self.out.get(timeout=wait) if wait is None or wait > 0 else self.out.get_nowait())
            while True:
                replies.append(self.out.get_nowait())
        except queue.Empty:
            pass
        replies = [(rid, result) for rid, result in replies if self.inflight.pop(rid, None) is not None]
        return replies + self._expire()

    def _wait_time(self, timeout: float | None) -> float | None:
        deadlines = [d for (_, _, d, _) in self.inflight.values() if d is not None]
        if not deadlines:
            return timeout
        until_first = max(0.0, min(deadlines) - time.monotonic())
        return until_first if timeout is None else min(timeout, until_first)

    def _expire(self) -> list[tuple[int, Any]]:
        now = time.monotonic()
        expired = []
        for req_id, (slot, kind, deadline, start) in list(self.inflight.items()):
            if deadline is None or now < deadline:
                continue
            del self.inflight[req_id]
            worker = self.threads.pop(slot, None)
            if worker is not None:
                worker.abandon()
            if kind == "call":
                expired.append((req_id, ("error", TimeoutError(
                    f"slot {slot}: call timed out after {self.step_timeout_s} s; its env will be rebuilt"))))
            else:
                expired.append((req_id, StepRecord.failure(slot, kind, "timeout", now - start)))
        return expired

    def close(self) -> None:
        for worker in self.threads.values():
            worker.inbox.put(_STOP)
        give_up = time.monotonic() + 2.0  # a hung env must not make close() hang too
        for worker in self.threads.values():
            worker.thread.join(timeout=max(0.0, give_up - time.monotonic()))
        self.threads.clear()
        self.inflight.clear()
