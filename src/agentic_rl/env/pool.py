"""``EnvPool``: N env instances stepped concurrently, results returned as they come.

The rollout engine keeps one episode per slot. It submits a reset or a step for a slot, goes on with
other work (decoding for the other slots), and collects whatever finished::

    with EnvPool("tool-use-v0", num_envs=8, backend="process", num_workers=2) as pool:
        for slot in range(8):
            pool.submit_reset(slot, seed=slot)
        while pool.pending:
            for record in pool.results(timeout=1.0):
                ...  # record.slot, record.observation, record.reward, record.error
                pool.submit_step(record.slot, action)

Backends:

- ``thread`` (default): one thread per slot, in this process. Cheap; fine for envs that wait on I/O or
  subprocesses (sandboxed code), no speed-up for pure-Python CPU work (the GIL).
- ``process``: ``num_workers`` worker processes (default: one per CPU, at most ``num_envs``); slot ``i``
  lives on worker ``i % num_workers``. ``env_fn`` and reset ``options`` (e.g. a ``Task``) must pickle.
- ``ray``: each env instance is a Ray actor. Uses the running Ray instance, else connects to
  ``ray_address``, else starts a local one. Needs the ``ray`` extra (``pip install 'agentic-rl[ray]'``).

Failure isolation: an env that raises, hangs past ``step_timeout_s`` or kills its worker yields a
:class:`StepRecord` with ``error`` set and ``terminated=True`` for that slot; the other slots go on, and
the failed slot's env is rebuilt at its next ``submit_reset``. A hang on the ``process`` backend is first
interrupted inside the worker (the worker's other envs survive); a worker that still does not answer
``step_timeout_s + 2 s`` later is killed and restarted, and the other slots it hosted report
``crash:WorkerRestarted`` on their next request.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from agentic_rl.env._host import StepRecord
from agentic_rl.env.registry import EnvSpec, spec

__all__ = ["BACKENDS", "EnvPool", "StepRecord"]

BACKENDS = ("thread", "process", "ray")


class EnvFactory:
    """A picklable ``() -> Env``: a registered id (resolved to its spec here, so that ids registered at
    run time in this process also work in worker processes) or a callable, plus keyword arguments."""

    def __init__(self, env_fn: str | Callable[..., Any], env_kwargs: dict[str, Any] | None = None):
        self.env_kwargs = dict(env_kwargs or {})
        self.spec: EnvSpec | None = None
        self.fn: Callable[..., Any] | None = None
        if isinstance(env_fn, str):
            self.spec = spec(env_fn)
            self.spec.check_kwargs(self.env_kwargs)  # fail here, not once per slot inside the workers
        elif callable(env_fn):
            self.fn = env_fn
        else:
            raise TypeError(f"env_fn must be an env id or a callable returning an env, got {type(env_fn).__name__}")

    def __call__(self) -> Any:
        if self.spec is not None:
            return self.spec.make(**self.env_kwargs)
        assert self.fn is not None
        return self.fn(**self.env_kwargs)

    def __repr__(self) -> str:
        target = self.spec.id if self.spec is not None else getattr(self.fn, "__qualname__", repr(self.fn))
        return f"EnvFactory({target}, {self.env_kwargs})"


class Backend(Protocol):
    """How a backend runs requests. Each ``send`` gets exactly one reply from ``poll``: the env's answer,
    or a failure the backend made up (timeout, dead worker)."""

    def send(self, req_id: int, slot: int, kind: str, payload: tuple) -> None: ...

    def poll(self, timeout: float | None) -> list[tuple[int, Any]]:
        """``(req_id, result)`` pairs that finished; waits at most ``timeout`` seconds for the first."""
        ...

    def close(self) -> None: ...


class EnvPool:
    """``num_envs`` env instances (slots) run concurrently on a ``backend``; see the module docstring.

    At most one request per slot is in flight: submit, then collect its record with :meth:`results`
    before submitting again for that slot. Each :meth:`submit_reset` / :meth:`submit_step` yields exactly
    one :class:`StepRecord`. ``step_timeout_s=None`` disables timeouts. The pool owns its workers; close
    it (or use it as a context manager).
    """

    def __init__(
        self,
        env_fn: str | Callable[..., Any],
        num_envs: int,
        *,
        backend: str = "thread",
        env_kwargs: dict[str, Any] | None = None,
        step_timeout_s: float | None = 60.0,
        num_workers: int | None = None,
        ray_address: str | None = None,
        start_method: str | None = None,
        ray_actor_options: dict[str, Any] | None = None,
    ):
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
        if step_timeout_s is not None and step_timeout_s <= 0:
            raise ValueError(f"step_timeout_s must be > 0 or None, got {step_timeout_s!r}")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be >= 1 or None, got {num_workers!r}")
        self.num_envs = num_envs
        self.backend_name = backend
        self.step_timeout_s = step_timeout_s
        factory = EnvFactory(env_fn, env_kwargs)
        self._backend: Backend
        if backend == "thread":
            from agentic_rl.env.pool_thread import ThreadBackend

            self._backend = ThreadBackend(factory, step_timeout_s)
        elif backend == "process":
            from agentic_rl.env.pool_process import ProcessBackend

            workers = min(num_envs, num_workers or os.cpu_count() or 1)
            self._backend = ProcessBackend(factory, step_timeout_s, workers, start_method)
        else:
            from agentic_rl.env.pool_ray import RayBackend

            self._backend = RayBackend(factory, num_envs, step_timeout_s, ray_address, ray_actor_options)
        self._next_id = 0
        self._busy: dict[int, tuple[int, str]] = {}  # slot -> (req_id, kind) of its request in flight
        self._slot_of: dict[int, int] = {}  # req_id -> slot, for the requests in flight
        self._ready: list[StepRecord] = []
        self._replies: dict[int, Any] = {}  # req_id -> reply of a call()
        self._closed = False

    # -- submitting ----------------------------------------------------------------------------
    def submit_reset(self, slot: int, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a new episode on ``slot`` (building its env first if it has none or it failed)."""
        self._submit(slot, "reset", (seed, options))

    def submit_step(self, slot: int, action: str) -> None:
        """Send the policy's raw ``action`` text to ``slot``'s env. A non-str ``action`` raises TypeError."""
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the text the policy wrote), got {type(action).__name__}")
        self._submit(slot, "step", (action,))

    def _submit(self, slot: int, kind: str, payload: tuple) -> int:
        self._check_open()
        if not isinstance(slot, int) or not 0 <= slot < self.num_envs:
            raise IndexError(f"slot must be an integer in [0, {self.num_envs}), got {slot!r}")
        if slot in self._busy:
            raise RuntimeError(f"slot {slot} already has a {self._busy[slot][1]} in flight; "
                               "collect it with results() before submitting again")
        req_id = self._next_id
        self._next_id += 1
        self._busy[slot] = (req_id, kind)
        self._slot_of[req_id] = slot
        self._backend.send(req_id, slot, kind, payload)
        return req_id

    # -- collecting ----------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Requests submitted whose records :meth:`results` has not returned yet."""
        return len(self._busy) + len(self._ready)

    def results(self, timeout: float | None = None) -> list[StepRecord]:
        """The records finished so far, in completion order.

        Blocks until at least one is ready or ``timeout`` seconds passed (``None``: no limit; the pool's
        step timeout still bounds the wait). Returns ``[]`` at once when nothing is pending.
        """
        self._check_open()
        deadline = None if timeout is None else time.monotonic() + timeout
        self._collect(0.0)
        while not self._ready and self._busy:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            self._collect(left)
        ready, self._ready = self._ready, []
        return ready

    def call(self, slot: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``env.<method>(*args, **kwargs)`` on ``slot``'s env and return its result (e.g.
        ``"system_prompt"``, ``"state"``, ``"expert_action"``). The slot must be idle and reset.
        An exception raised by the method is raised here; a hang raises TimeoutError."""
        if not isinstance(method, str) or method.startswith("_"):
            raise ValueError(f"method must be the name of a public env method, got {method!r}")
        req_id = self._submit(slot, "call", (method, args, kwargs))
        while req_id not in self._replies:
            self._collect(None)
        status, value = self._replies.pop(req_id)
        if status == "error":
            raise value
        return value

    def _collect(self, timeout: float | None) -> None:
        for req_id, result in self._backend.poll(timeout):
            slot = self._slot_of.pop(req_id, None)
            if slot is None:
                continue  # a late answer to a request already failed by timeout
            kind = self._busy.pop(slot)[1]
            if kind == "call":
                self._replies[req_id] = result
            else:
                self._ready.append(result)

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the workers and close every env. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._backend.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the EnvPool is closed")

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn down what close() needs
            pass

    def __repr__(self) -> str:
        return f"EnvPool(num_envs={self.num_envs}, backend={self.backend_name!r}, pending={self.pending})"
