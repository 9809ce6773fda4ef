"""Environment checkers.

- :class:`PassiveChecker` wraps every env built by :func:`~agentic_rl.env.registry.make`. It looks at
  what the env returns (cheap checks, every call) and *warns* — once per kind of problem — with an
  :class:`EnvContractWarning`; it never changes results and never raises for the env's own output.
- :func:`check_env` (implemented in :mod:`agentic_rl.env.check`) is the invasive check a user runs on an env
  before training on it; ``agentic-rl check-env ID`` runs it from the command line.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

from agentic_rl.env.wrappers import StepResult, TextWrapper

if TYPE_CHECKING:
    from agentic_rl.env.check import CheckReport


class EnvContractWarning(UserWarning):
    """An env returned something that breaks the contract in :mod:`agentic_rl.env.core`."""


def step_problems(result: Any, reward_range: tuple[float, float]) -> list[tuple[str, str]]:
    """``(key, message)`` for each way a ``step()`` return value breaks the contract; ``[]`` if none."""
    if not isinstance(result, tuple) or len(result) != 5:
        return [("step_tuple", f"step() must return (observation, reward, terminated, truncated, info), "
                               f"got {type(result).__name__} of length {len(result) if hasattr(result, '__len__') else '?'}")]
    observation, reward, terminated, truncated, info = result
    problems = []
    if not isinstance(observation, str):
        problems.append(("obs_type", f"step() observation must be a str, got {type(observation).__name__}"))
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        problems.append(("reward_type", f"step() reward must be a float, got {type(reward).__name__}"))
    elif not math.isfinite(reward):
        problems.append(("reward_finite", f"step() reward must be finite, got {reward!r}"))
    else:
        low, high = reward_range
        if not low <= reward <= high:
            problems.append(("reward_range", f"step() reward {reward!r} is outside reward_range {reward_range}"))
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, bool):
            problems.append((f"{name}_type", f"step() {name} must be a bool, got {type(flag).__name__}"))
    if not isinstance(info, dict):
        problems.append(("info_type", f"step() info must be a dict, got {type(info).__name__}"))
        return problems
    problems += _info_problems(info, reward)
    return problems


def _info_problems(info: dict, reward: Any) -> list[tuple[str, str]]:
    problems = []
    if "success" not in info:
        problems.append(("info_success", "step() info has no 'success' (the env's independent outcome check)"))
    elif not isinstance(info["success"], bool):
        problems.append(("info_success_type",
                         f"info['success'] must be a bool, got {type(info['success']).__name__} {info['success']!r}"))
    terms = info.get("reward_terms")
    if terms is None:
        problems.append(("info_reward_terms", "step() info has no 'reward_terms' (dict name -> float)"))
    elif not isinstance(terms, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in terms.values()
    ):
        problems.append(("reward_terms_type", f"info['reward_terms'] must map names to floats, got {terms!r}"[:300]))
    elif isinstance(reward, (int, float)) and math.isfinite(reward):
        total = float(sum(terms.values()))
        if not math.isclose(total, float(reward), rel_tol=1e-6, abs_tol=1e-6):
            problems.append(("reward_terms_sum",
                             f"info['reward_terms'] {terms} sums to {total:g}, but the reward is {reward:g}"))
    return problems


def reset_problems(result: Any) -> list[tuple[str, str]]:
    """``(key, message)`` for each way a ``reset()`` return value breaks the contract."""
    if not isinstance(result, tuple) or len(result) != 2:
        return [("reset_tuple", f"reset() must return (observation, info), got {type(result).__name__}")]
    observation, info = result
    problems = []
    if not isinstance(observation, str):
        problems.append(("reset_obs_type", f"reset() observation must be a str, got {type(observation).__name__}"))
    if not isinstance(info, dict):
        problems.append(("reset_info_type", f"reset() info must be a dict, got {type(info).__name__}"))
    return problems


class PassiveChecker(TextWrapper):
    """Cheap contract checks applied by ``make()``; warns once per kind of problem, never raises for
    the env's own output. A non-str action raises ``TypeError`` before it reaches the env."""

    def __init__(self, env: Any):
        super().__init__(env)
        self.warned: set[str] = set()

    def reset(self, **kwargs: Any) -> tuple[str, dict]:
        result = self.env.reset(**kwargs)
        self._report(reset_problems(result))
        return result

    def step(self, action: str) -> StepResult:
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the text the policy wrote), got {type(action).__name__}")
        result = self.env.step(action)
        self._report(step_problems(result, getattr(self.env, "reward_range", (-math.inf, math.inf))))
        return result

    def _report(self, problems: list[tuple[str, str]]) -> None:
        for key, message in problems:
            if key not in self.warned:
                self.warned.add(key)
                name = type(self.env.unwrapped).__name__
                warnings.warn(f"{name}: {message}", EnvContractWarning, stacklevel=3)


def check_env(env_or_id: Any, n_random_actions: int = 1000, seed: int = 0, **options: Any) -> CheckReport:
    """The invasive contract check; see :func:`agentic_rl.env.check.check_env` for what it checks and
    the ``options`` (``env_kwargs``, ``gymnasium_check``, ``raise_on_failure``)."""
    from agentic_rl.env.check import check_env as run_checks

    return run_checks(env_or_id, n_random_actions, seed, **options)
