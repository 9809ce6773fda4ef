"""Registry of environments: versioned ids (``name-vN``), ``register``, ``make``, listing."""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentic_rl.env.core import Env

_ID_RE = re.compile(r"^[a-z][a-z0-9_-]*-v\d+$")


@dataclass(frozen=True)
class EnvSpec:
    id: str
    entry_point: str | Callable[..., Env]
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., Env]:
        if callable(self.entry_point):
            return self.entry_point
        module, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, EnvSpec] = {}


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


def spec(id: str) -> EnvSpec:
    _ensure_builtins()
    if id not in _REGISTRY:
        close = difflib.get_close_matches(id, list(_REGISTRY), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown env id {id!r}.{hint} Registered: {', '.join(sorted(_REGISTRY))}")
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
    """Build a registered env. Unknown ids list close matches; unknown kwargs list the accepted ones."""
    env_spec = spec(id)
    factory = env_spec.load()
    accepted, open_ended = _accepted_kwargs(factory)
    unknown = sorted(set(kwargs) - accepted)
    if unknown and not open_ended:
        raise TypeError(f"{id}: unknown argument(s) {unknown}; accepted: {', '.join(sorted(accepted))}")
    env = factory(**{**env_spec.defaults, **kwargs})
    env.spec_id = id  # type: ignore[attr-defined]
    if passive_check:
        from agentic_rl.env.checker import PassiveChecker

        env = PassiveChecker(env)
    return env


_BUILTINS_LOADED = False


def _ensure_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        importlib.import_module("agentic_rl.envs")
