"""The ``process`` backend of :class:`~agentic_rl.env.pool.EnvPool`: envs in worker processes.

Worker ``w`` hosts slots ``w, w + n, w + 2n, ...`` and answers their requests one at a time. Requests go
through a per-worker ``multiprocessing`` queue (its feeder thread never blocks this process), answers
come back through a per-worker pipe, so killing one worker cannot corrupt another's channel.

Timeouts, in two layers: inside the worker a ``SIGALRM`` timer interrupts a request after
``step_timeout_s`` (the slot's env is dropped; the worker and its other envs survive). A worker that
sends nothing for ``step_timeout_s + 2 s`` while busy (stuck in C code, or an env that swallows
``BaseException``) is killed and restarted; its busy slot reports ``timeout``, its other queued requests
``crash:WorkerRestarted``. A worker that dies (segfault, ``os._exit``) fails its queued requests with
``crash:WorkerDied``. Either way the slots it hosted get fresh envs at their next reset.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from agentic_rl.env._host import EnvHost, StepRecord, crash_text

#: Extra seconds a busy worker may stay silent past the step timeout before it is killed.
KILL_GRACE_S = 2.0
#: Seconds a new worker may take to start (spawn + imports) before it counts as hung.
STARTUP_TIMEOUT_S = 120.0


def _worker_main(factory: Callable[[], Any], time_limit_s: float | None, inbox: Any, conn: Connection) -> None:
    """Entry point of a worker process: serve requests until ``None`` arrives."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    host = EnvHost(factory, time_limit_s)
    conn.send(("ready", None))
    try:
        while (request := inbox.get()) is not None:
            req_id, slot, kind, payload = request
            result = host.handle(slot, kind, payload)
            try:
                conn.send((req_id, result))
            except Exception as exc:  # noqa: BLE001 - e.g. an info dict that does not pickle
                host.drop(slot)
                if kind == "call":
                    conn.send((req_id, ("error", RuntimeError(f"result of {payload[0]}() did not pickle: {exc}"))))
                else:
                    conn.send((req_id, StepRecord.failure(slot, kind, crash_text(exc))))
    finally:
        host.close()


class _Worker:
    def __init__(self, ctx: Any, index: int, factory: Callable[[], Any], time_limit_s: float | None):
        self.inbox = ctx.Queue()
        self.conn, child_conn = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_worker_main, args=(factory, time_limit_s, self.inbox, child_conn),
                                name=f"envpool-worker-{index}", daemon=True)
        self.proc.start()
        child_conn.close()  # so that the worker's death reads as EOF here
        self.ready = False
        self.started = time.monotonic()
        self.last_progress = self.started
        self.outstanding: dict[int, tuple[int, str, float]] = {}  # req_id -> (slot, kind, sent), FIFO

    def silent_for(self, now: float) -> float:
        """Seconds the worker has been busy without answering."""
        first_sent = next(iter(self.outstanding.values()))[2]
        return now - max(self.last_progress, first_sent)

    def stop(self, kill: bool) -> None:
        if kill:
            self.proc.kill()
        self.proc.join(timeout=1.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=1.0)
        self.inbox.cancel_join_thread()  # never block on flushing requests to a dead worker
        self.inbox.close()
        self.conn.close()


class ProcessBackend:
    """Runs the pool's envs in ``num_workers`` worker processes (``start_method``: forkserver/spawn)."""

    def __init__(self, factory: Callable[[], Any], step_timeout_s: float | None, num_workers: int,
                 start_method: str | None = None):
        try:
            pickle.dumps(factory)
        except Exception as exc:  # noqa: BLE001 - any pickling failure gets the same advice
            raise TypeError(f"the process backend sends env_fn to worker processes, so it must pickle "
                            f"(a module-level function or class, or functools.partial of one): {exc}") from exc
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        if start_method == "fork":
            raise ValueError("start_method='fork' is unsafe with threads (torch, ray); use 'forkserver' or 'spawn'")
        self.ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            # Preloading also hands this process's sys.path to the fork server.
            self.ctx.set_forkserver_preload(["agentic_rl.env.pool_process"])
        self.factory = factory
        self.step_timeout_s = step_timeout_s
        self.workers: list[_Worker | None] = [self._spawn(i) for i in range(num_workers)]

    def _spawn(self, index: int) -> _Worker:
        return _Worker(self.ctx, index, self.factory, self.step_timeout_s)

    def send(self, req_id: int, slot: int, kind: str, payload: tuple) -> None:
        index = slot % len(self.workers)
        worker = self.workers[index]
        if worker is None:
            worker = self.workers[index] = self._spawn(index)
        worker.outstanding[req_id] = (slot, kind, time.monotonic())
        worker.inbox.put((req_id, slot, kind, payload))

    def poll(self, timeout: float | None) -> list[tuple[int, Any]]:
        replies: list[tuple[int, Any]] = []
        live = {w.conn: w for w in self.workers if w is not None}
        if live:
            for conn in wait(list(live), timeout=self._wait_time(timeout)):
                replies.extend(self._receive(live[conn]))
        else:
            time.sleep(timeout or 0.0)
        replies.extend(self._expire())
        return replies

    def _receive(self, worker: _Worker) -> list[tuple[int, Any]]:
        replies = []
        try:
            while worker.conn.poll():
                req_id, result = worker.conn.recv()
                worker.last_progress = time.monotonic()
                if req_id == "ready":
                    worker.ready = True
                elif worker.outstanding.pop(req_id, None) is not None:
                    replies.append((req_id, result))
        except (EOFError, OSError):
            worker.proc.join(timeout=1.0)
            reason = f"crash:WorkerDied: the worker process exited with code {worker.proc.exitcode}"
            replies.extend(self._retire(worker, reason, reason, kill=False))
        return replies

    def _wait_time(self, timeout: float | None) -> float | None:
        now = time.monotonic()
        waits = [] if timeout is None else [timeout]
        for worker in self.workers:
            if worker is not None and worker.outstanding:
                waits.append(max(0.0, self._limit(worker) - worker.silent_for(now)))
        return min(waits) if waits else None

    def _limit(self, worker: _Worker) -> float:
        if not worker.ready:
            return STARTUP_TIMEOUT_S + (self.step_timeout_s or 0.0)
        return float("inf") if self.step_timeout_s is None else self.step_timeout_s + KILL_GRACE_S

    def _expire(self) -> list[tuple[int, Any]]:
        now = time.monotonic()
        replies = []
        for worker in self.workers:
            if worker is not None and worker.outstanding and worker.silent_for(now) >= self._limit(worker):
                slot = next(iter(worker.outstanding.values()))[0]
                reason = f"crash:WorkerRestarted: the worker was restarted after slot {slot} timed out"
                replies.extend(self._retire(worker, "timeout", reason, kill=True))
        return replies

    def _retire(self, worker: _Worker, first_error: str, other_error: str, kill: bool) -> list[tuple[int, Any]]:
        """Stop ``worker`` and fail its outstanding requests: the one it was running with
        ``first_error``, the ones queued behind it with ``other_error``."""
        worker.stop(kill=kill)
        self.workers[self.workers.index(worker)] = None
        now = time.monotonic()
        replies = []
        for position, (req_id, (slot, kind, sent)) in enumerate(worker.outstanding.items()):
            error = first_error if position == 0 else other_error
            if kind == "call":
                exc = TimeoutError if error == "timeout" else RuntimeError
                replies.append((req_id, ("error", exc(f"slot {slot}: call failed: {error}"))))
            else:
                replies.append((req_id, StepRecord.failure(slot, kind, error, now - sent)))
        worker.outstanding.clear()
        return replies

    def close(self) -> None:
        for worker in self.workers:
            if worker is not None and worker.proc.is_alive():
                worker.inbox.put(None)
        give_up = time.monotonic() + 2.0  # a worker stuck in a hung env is killed, not waited for
        for worker in self.workers:
            if worker is not None:
                worker.proc.join(timeout=max(0.0, give_up - time.monotonic()))
                worker.stop(kill=worker.proc.is_alive())
        self.workers = [None] * len(self.workers)
