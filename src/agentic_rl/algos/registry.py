"""Registries of advantage estimators and policy losses, looked up by name.

Each kind has one signature (see :mod:`agentic_rl.algos.estimators` and :mod:`agentic_rl.algos.losses`),
so a config names a variant and the trainer never branches on it. Users register their own variants
with the same decorators::

    @register_advantage("my_estimator")
    def my_estimator(rewards, masks, groups, values=None, *, gamma=1.0, lam=1.0, norm_std=True, eps=1e-6):
        ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_ADVANTAGES: dict[str, Callable[..., Any]] = {}
_POLICY_LOSSES: dict[str, Callable[..., Any]] = {}


def _register(table: dict[str, Callable[..., Any]], kind: str, name: str, override: bool) -> Callable[[F], F]:
    def decorator(fn: F) -> F:
        if name in table and not override:
            raise ValueError(f"{kind} {name!r} is already registered (pass override=True to replace it)")
        table[name] = fn
        return fn

    return decorator


def _lookup(table: dict[str, Callable[..., Any]], kind: str, name: str) -> Callable[..., Any]:
    try:
        return table[name]
    except KeyError:
        raise KeyError(f"unknown {kind} {name!r}; registered: {', '.join(sorted(table))}") from None


def register_advantage(name: str, *, override: bool = False) -> Callable[[F], F]:
    """Decorator: register an advantage estimator under ``name``."""
    return _register(_ADVANTAGES, "advantage estimator", name, override)


def register_policy_loss(name: str, *, override: bool = False) -> Callable[[F], F]:
    """Decorator: register a policy loss under ``name``."""
    return _register(_POLICY_LOSSES, "policy loss", name, override)


def advantages(name: str) -> Callable[..., Any]:
    """The advantage estimator registered as ``name`` (KeyError listing the registered ones)."""
    return _lookup(_ADVANTAGES, "advantage estimator", name)


def policy_loss(name: str) -> Callable[..., Any]:
    """The policy loss registered as ``name`` (KeyError listing the registered ones)."""
    return _lookup(_POLICY_LOSSES, "policy loss", name)


def registered_advantages() -> list[str]:
    return sorted(_ADVANTAGES)


def registered_policy_losses() -> list[str]:
    return sorted(_POLICY_LOSSES)
