"""Registry of environments: versioned ids (``name-vN``), ``register``, ``make``, listing."""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentic_rl.env.core import Env
from agentic_rl.tasks.core import TaskSet, load_with_locations

_ID_RE = re.compile(r"^[a-z][a-z0-9_-]*-v\d+$")


@dataclass(frozen=True)
class EnvSpec:
    """How to build one registered env: ``entry_point(**{**defaults, **kwargs})``.

    ``entry_point`` is an :class:`Env` subclass, a factory returning one, or ``"package.module:Name"``
    (imported on first use, so listing envs imports nothing heavy).
    """

    id: str
    entry_point: str | Callable[..., Env]
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., Env]:
        """The class or factory behind ``entry_point`` (importing its module if needed)."""
        if callable(self.entry_point):
            return self.entry_point
        module, _, attr = self.entry_point.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"{self.id}: cannot load entry point {self.entry_point!r}: {exc}") from exc

    def check_kwargs(self, kwargs: dict[str, Any]) -> None:
        """Raise TypeError naming any keyword the factory does not accept, and the accepted ones."""
        accepted, open_ended = _accepted_kwargs(self.load())
        unknown = sorted(set(kwargs) - accepted)
        if unknown and not open_ended:
            raise TypeError(f"{self.id}: unknown argument(s) {unknown}; accepted: {', '.join(sorted(accepted))}")

    def make(self, *, passive_check: bool = True, **kwargs: Any) -> Env:
        """Build the env (see :func:`make`)."""
        self.check_kwargs(kwargs)
        env = self.load()(**{**self.defaults, **kwargs})
        env.spec_id = self.id  # type: ignore[attr-defined]
        if passive_check:
            from agentic_rl.env.checker import PassiveChecker

            env = PassiveChecker(env)
        return env

    def summary(self) -> str:
        """The one-line description: the registered one, else the class's ``description``."""
        if self.description:
            return self.description
        try:
            return getattr(self.load(), "description", "") or ""
        except ImportError:
            return ""


_REGISTRY: dict[str, EnvSpec] = {}


class UnknownEnvError(KeyError):
    """An env id that is not registered. The message lists close matches and every registered id."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0]) if self.args else ""


def register(
    id: str, entry_point: str | Callable[..., Env], description: str = "", *, override: bool = False, **defaults: Any
) -> EnvSpec:
    """Register an env under a versioned id like ``my-env-v0``.

    ``entry_point`` is a class/factory or ``"package.module:Name"`` (imported lazily); ``defaults`` are
    keyword arguments passed to it unless the caller of :func:`make` overrides them.
    """
    if not _ID_RE.match(id):
        raise ValueError(f"env id {id!r} must look like 'name-v0' (lower-case, versioned)")
    if id in _REGISTRY and not override:
        raise ValueError(f"env id {id!r} is already registered (pass override=True to replace it)")
    spec = EnvSpec(id, entry_point, description, dict(defaults))
    _REGISTRY[id] = spec
    return spec


def unregister(id: str) -> EnvSpec:
    """Remove a registered id (e.g. one a test registered) and return its spec."""
    env_spec = spec(id)
    del _REGISTRY[id]
    return env_spec


def spec(id: str) -> EnvSpec:
    """The spec registered under ``id``; :class:`UnknownEnvError` (a KeyError) lists close matches."""
    _ensure_builtins()
    if not isinstance(id, str):
        raise TypeError(f"env id must be a str like 'tool-use-v0', got {type(id).__name__}")
    if id not in _REGISTRY:
        close = difflib.get_close_matches(id, list(_REGISTRY), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownEnvError(f"unknown env id {id!r}.{hint} Registered: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[id]


def registered() -> dict[str, EnvSpec]:
    """All registered specs by id (built-ins included)."""
    _ensure_builtins()
    return dict(sorted(_REGISTRY.items()))


def _accepted_kwargs(factory: Callable[..., Any]) -> tuple[set[str], bool]:
    names: set[str] = set()
    var_kw = False
    targets = [factory]
    if inspect.isclass(factory):
        targets = [c.__init__ for c in factory.__mro__ if "__init__" in vars(c) and c is not object]
    for target in targets:
        params = inspect.signature(target).parameters.values()
        has_var = any(p.kind is p.VAR_KEYWORD for p in params)
        names |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"}
        if not has_var:
            break  # a class that does not forward **kwargs stops the chain
        var_kw = has_var
    return names, var_kw and not inspect.isclass(factory)


def make(id: str, *, passive_check: bool = True, **kwargs: Any) -> Env:
    """Build a registered env: ``make("tool-use-v0", perturbation="paraphrase")``.

    ``kwargs`` override the spec's defaults. An unknown id raises KeyError listing close matches; an
    unknown keyword raises TypeError naming it and the accepted ones. With ``passive_check`` (default)
    the env is wrapped in :class:`~agentic_rl.env.checker.PassiveChecker`, which warns (never raises)
    when the env breaks the contract; ``.unwrapped`` gives the bare env.
    """
    return spec(id).make(passive_check=passive_check, **kwargs)


def task_set(id: str, env_kwargs: dict[str, Any] | None = None, task_file: str | Path | None = None) -> TaskSet:
    """The tasks to train or evaluate a registered env on: ``task_file``, else the env's own set.

    A task file is checked with the env's ``task_validator`` (if it has one) line by line, so bad ``data``
    is named by file, line and field before any episode, not met as crashed episodes. The env's own set
    is the one it builds from ``env_kwargs``.
    """
    if task_file is not None:
        tasks, locations = load_with_locations(task_file)
        validate = getattr(spec(id).load(), "task_validator", None)
        if validate is not None:
            for task in tasks:
                validate(task, locations[task.id])
        return tasks
    env = make(id, passive_check=False, **(env_kwargs or {}))
    try:
        tasks = getattr(env.unwrapped, "tasks", None)
    finally:
        env.close()
    if tasks is None:
        raise ValueError(f"{id} has no task set of its own; pass a task file")
    return tasks


_BUILTINS_LOADED = False


def _ensure_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        importlib.import_module("agentic_rl.envs")
