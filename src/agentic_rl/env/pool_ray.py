"""The ``ray`` backend of :class:`~agentic_rl.env.pool.EnvPool`: each env instance is a Ray actor.

Ray is optional (``pip install 'agentic-rl[ray]'``) and imported only here. The pool uses the Ray
instance already initialised in this process; otherwise it connects to ``ray_address`` (a cluster), or
starts a local instance without the dashboard. On a cluster, every node needs agentic-rl installed (or a
``runtime_env`` in ``ray_actor_options``) and the env factory must be importable or cloudpickle-able.

An actor that does not answer within the step timeout is killed (``ray.kill``); an actor that dies
fails its request with ``crash:ActorDied``. Either way the slot gets a new actor at its next request.
Requests sent to an actor still starting (process start + imports) get their time limit counted from
the moment it is ready.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from agentic_rl.env._host import EnvHost, StepRecord, crash_text


def import_ray() -> Any:
    """``import ray`` with a clear message when the optional extra is missing."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the 'ray' EnvPool backend needs Ray: pip install 'agentic-rl[ray]'") from exc
    return ray


class EnvActor:
    """The body of a Ray actor hosting one slot's env (wrapped with ``ray.remote`` at run time)."""

    def __init__(self, factory: Callable[[], Any]):
        self.host = EnvHost(factory)

    def ready(self) -> bool:
        return True

    def handle(self, slot: int, kind: str, payload: tuple) -> Any:
        return self.host.handle(slot, kind, payload)

    def close(self) -> None:
        self.host.close()


class RayBackend:
    """One actor per slot, created up front (so they start in parallel) and again after a failure."""

    def __init__(self, factory: Callable[[], Any], num_envs: int, step_timeout_s: float | None,
                 ray_address: str | None = None, actor_options: dict[str, Any] | None = None):
        ray = self.ray = import_ray()
        if not ray.is_initialized():
            if ray_address is not None:
                ray.init(address=ray_address, log_to_driver=False)
            else:
                ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        self.remote_cls = ray.remote(EnvActor)
        if actor_options:
            self.remote_cls = self.remote_cls.options(**actor_options)
        self.factory = factory
        self.step_timeout_s = step_timeout_s
        self.actors: list[Any] = [None] * num_envs
        self.ready_at: list[float | None] = [None] * num_envs
        self.ready_refs: dict[Any, int] = {}  # ObjectRef of actor.ready() -> slot
        self.inflight: dict[Any, tuple[int, int, str, float]] = {}  # ObjectRef -> (req_id, slot, kind, sent)
        for slot in range(num_envs):
            self._start(slot)

    def _start(self, slot: int) -> Any:
        actor = self.actors[slot] = self.remote_cls.remote(self.factory)
        self.ready_at[slot] = None
        self.ready_refs[actor.ready.remote()] = slot
        return actor

    def send(self, req_id: int, slot: int, kind: str, payload: tuple) -> None:
        actor = self.actors[slot] or self._start(slot)
        self.inflight[actor.handle.remote(slot, kind, payload)] = (req_id, slot, kind, time.monotonic())

    def poll(self, timeout: float | None) -> list[tuple[int, Any]]:
        refs = list(self.inflight) + list(self.ready_refs)
        replies: list[tuple[int, Any]] = []
        if refs:
            done, _ = self.ray.wait(refs, num_returns=1, timeout=self._wait_time(timeout))
            if done:
                done, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in done:
                replies.extend(self._finish(ref))
        elif timeout:
            time.sleep(timeout)
        return replies + self._expire()

    def _finish(self, ref: Any) -> list[tuple[int, Any]]:
        if ref in self.ready_refs:
            slot = self.ready_refs.pop(ref)
            self.ready_at[slot] = time.monotonic()
            return []  # a dead actor shows up again through its in-flight request
        req_id, slot, kind, sent = self.inflight.pop(ref)
        try:
            return [(req_id, self.ray.get(ref))]
        except self.ray.exceptions.RayActorError as exc:
            error = f"crash:ActorDied: {_first_line(exc)}"
        except Exception as exc:  # noqa: BLE001 - e.g. a result that failed to serialise
            error = crash_text(exc)
        self._forget(slot, kill=True)
        if kind == "call":
            return [(req_id, ("error", RuntimeError(f"slot {slot}: call failed: {error}")))]
        return [(req_id, StepRecord.failure(slot, kind, error, time.monotonic() - sent))]

    def _deadline(self, slot: int, sent: float) -> float | None:
        ready = self.ready_at[slot]
        if self.step_timeout_s is None or ready is None:
            return None  # the clock starts once the actor is up
        return max(sent, ready) + self.step_timeout_s

    def _wait_time(self, timeout: float | None) -> float | None:
        now = time.monotonic()
        waits = [] if timeout is None else [timeout]
        for _, slot, _, sent in self.inflight.values():
            deadline = self._deadline(slot, sent)
            if deadline is not None:
                waits.append(max(0.0, deadline - now))
        if any(self.ready_at[slot] is None for _, slot, _, _ in self.inflight.values()) and self.step_timeout_s:
            waits.append(0.5)  # re-check soon: a starting actor's clock begins when it is ready
        return min(waits) if waits else None

    def _expire(self) -> list[tuple[int, Any]]:
        now = time.monotonic()
        replies = []
        for ref, (req_id, slot, kind, sent) in list(self.inflight.items()):
            deadline = self._deadline(slot, sent)
            if deadline is None or now < deadline:
                continue
            del self.inflight[ref]
            self._forget(slot, kill=True)
            if kind == "call":
                replies.append((req_id, ("error", TimeoutError(f"slot {slot}: call timed out"))))
            else:
                replies.append((req_id, StepRecord.failure(slot, kind, "timeout", now - sent)))
        return replies

    def _forget(self, slot: int, kill: bool) -> None:
        actor, self.actors[slot] = self.actors[slot], None
        self.ready_refs = {ref: s for ref, s in self.ready_refs.items() if s != slot}
        if kill and actor is not None:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - it may be dead already
                pass

    def close(self) -> None:
        # Let each env release its resources (sandboxes, temp dirs), but do not wait on a hung one.
        closing = [actor.close.remote() for actor in self.actors if actor is not None]
        if closing:
            self.ray.wait(closing, num_returns=len(closing), timeout=2.0)
        for slot in range(len(self.actors)):
            self._forget(slot, kill=True)
        self.inflight.clear()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
