"""``check_env``: the invasive contract check a user runs on an env before training on it.

It builds (or takes) an env and checks, each as a named entry of a :class:`CheckReport`:

- ``spaces`` — text observation/action spaces and an ordered ``reward_range``;
- ``reset`` — ``(str, dict)`` with ``task_id``; ``options={"task": ...}`` selects that task;
- ``action_type`` — a non-str action raises ``TypeError``;
- ``determinism`` — same seed and same actions ⇒ same episode (same instance, and a fresh one);
- ``reset_clean`` — ``reset(seed)`` after an episode gives the same start (observation, info, state);
- ``garbage_actions`` — adversarial strings (:mod:`agentic_rl.env.fuzz`) and ``n_random_actions``
  random ones never raise; along the way ``step_types``, ``rewards`` (finite, within ``reward_range``),
  ``info`` (``success`` is a bool, ``reward_terms`` sums to the reward) and ``state_json`` are checked;
- ``gymnasium`` — Gymnasium's own ``gymnasium.utils.env_checker.check_env`` on the bare env;
- ``close`` — ``close()`` twice does not raise.
"""

from __future__ import annotations

import json
import random
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentic_rl.agent.actions import ACTION_KINDS
from agentic_rl.env.checker import reset_problems, step_problems
from agentic_rl.env.core import admissible
from agentic_rl.env.fuzz import RandomActions, adversarial_actions

#: Info keys compared by the determinism checks (others may hold timings that legitimately vary).
_COMPARED_INFO = ("task_id", "success", "error", "reward_terms", "action_kind", "admissible_actions")
#: Steps after which the fuzzer starts a new episode even if the env never ends one.
_MAX_EPISODE_STEPS = 100
_EXAMPLES = 3  # failure messages kept per check


class CheckFailed(AssertionError):
    """One check found the env breaking the contract; the message says how."""


class EnvCheckError(AssertionError):
    """Raised by ``check_env(..., raise_on_failure=True)``; the message is the formatted report."""


@dataclass
class CheckResult:
    name: str
    passed: bool
    message: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    """The outcome of :func:`check_env`: one :class:`CheckResult` per check."""

    env: str
    results: list[CheckResult] = field(default_factory=list)
    actions: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.passed for r in self.results)

    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.passed]

    def result(self, name: str) -> CheckResult:
        return next(r for r in self.results if r.name == name)

    def format(self) -> str:
        verdict = "OK" if self.ok else f"FAILED ({len(self.failures())} of {len(self.results)} checks)"
        lines = [f"check-env {self.env}: {verdict} — {self.actions} actions in {self.seconds:.1f} s"]
        for r in self.results:
            lines.append(f"  {'PASS' if r.passed else 'FAIL'} {r.name}" + (f": {r.message}" if r.message else ""))
            lines += [f"       note: {note}" for note in r.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise EnvCheckError(self.format())


def check_env(env_or_id: Any, n_random_actions: int = 1000, seed: int = 0, *,
              env_kwargs: dict[str, Any] | None = None, gymnasium_check: bool = True,
              raise_on_failure: bool = False, check_timeout_s: float = 600.0) -> CheckReport:
    """Run every check on an env instance or a registered id; see the module docstring.

    With an id, fresh instances are built (``make(id, passive_check=False, **env_kwargs)``) so that
    determinism is also checked across instances; with an instance, only that instance is used (it is
    reset many times, and closed at the end). A check still running after ``check_timeout_s`` fails
    (the env hangs) and the later checks are skipped. Returns the report; with ``raise_on_failure`` a failed
    report raises :class:`EnvCheckError` carrying the formatted report.
    """
    build = _builder(env_or_id, env_kwargs)
    name = env_or_id if isinstance(env_or_id, str) else type(getattr(env_or_id, "unwrapped", env_or_id)).__name__
    report = CheckReport(name)
    start = time.perf_counter()
    try:
        env = build() if build is not None else env_or_id
    except Exception as exc:  # noqa: BLE001 - the report says why the env could not be built
        report.results.append(CheckResult("build", False, _exc_text(exc)))
        report.seconds = time.perf_counter() - start
        return _finish(report, raise_on_failure)
    checks: list[tuple[str, Callable[[], Any]]] = [
        ("spaces", lambda: _check_spaces(env)),
        ("reset", lambda: _check_reset(env, seed)),
        ("action_type", lambda: _check_action_type(env, seed)),
        ("determinism", lambda: _check_determinism(env, build, seed)),
        ("reset_clean", lambda: _check_reset_clean(env, seed)),
        ("garbage_actions", lambda: _fuzz(env, n_random_actions, seed, report)),
    ]
    if gymnasium_check:
        checks.append(("gymnasium", lambda: _check_gymnasium(build, env)))
    checks.append(("close", lambda: _check_close(env)))
    for check_name, fn in checks:
        results, finished = _run(check_name, fn, check_timeout_s)
        report.results += results
        if not finished:
            break  # the env is stuck inside a call; nothing more can be asked of it
    report.seconds = time.perf_counter() - start
    return _finish(report, raise_on_failure)


def _finish(report: CheckReport, raise_on_failure: bool) -> CheckReport:
    if raise_on_failure:
        report.raise_if_failed()
    return report


def _builder(env_or_id: Any, env_kwargs: dict[str, Any] | None) -> Callable[[], Any] | None:
    if isinstance(env_or_id, str):
        from agentic_rl.env.registry import spec

        env_spec = spec(env_or_id)  # an unknown id raises here, with close matches
        kwargs = dict(env_kwargs or {})
        env_spec.check_kwargs(kwargs)
        return lambda: env_spec.make(passive_check=False, **kwargs)
    if env_kwargs:
        raise ValueError("env_kwargs only applies when check_env is given an env id")
    return None


def _run(name: str, fn: Callable[[], Any], timeout_s: float) -> tuple[list[CheckResult], bool]:
    """Run one check in a daemon thread (so a hanging env fails the check instead of hanging the
    checker). ``fn`` returns notes, or a list of CheckResults (the fuzzing). Returns (results, finished)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["error"] = exc

    worker = threading.Thread(target=target, name=f"check-{name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return [CheckResult(name, False, f"did not finish within {timeout_s:g} s (an env call hangs?); "
                                         "the remaining checks were skipped")], False
    error = box.get("error")
    if isinstance(error, CheckFailed):
        return [CheckResult(name, False, str(error))], True
    if error is not None:
        return [CheckResult(name, False, _exc_text(error))], True
    value = box.get("value") or []
    if value and isinstance(value[0], CheckResult):
        return value, True
    return [CheckResult(name, True, notes=value)], True


def _exc_text(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    # Point at the env's code, not at the library call it made (subprocess, json...).
    own = [f for f in frames if "/lib/python" not in f.filename.replace("\\", "/")] or frames
    origin = f" (at {own[-1].filename}:{own[-1].lineno})" if own else ""
    return f"raised {type(exc).__name__}: {str(exc)[:300]}{origin}"


def _show(text: str) -> str:
    """A short, printable rendering of an action for messages."""
    shown = repr(text[:60]) + ("..." if len(text) > 60 else "")
    return f"{shown} ({len(text)} chars)" if len(text) > 60 else shown


# -- individual checks -----------------------------------------------------------------------
def _check_spaces(env: Any) -> None:
    for attr in ("observation_space", "action_space"):
        space = getattr(env, attr, None)
        if space is None or not space.contains("text"):
            raise CheckFailed(f"{attr} must accept text (a TextSpace), got {space!r}")
    low, high = env.reward_range
    if not low < high:
        raise CheckFailed(f"reward_range must be (low, high) with low < high, got {env.reward_range!r}")


def _check_reset(env: Any, seed: int) -> None:
    result = env.reset(seed=seed)
    for _, message in reset_problems(result):
        raise CheckFailed(message)
    observation, info = result
    if "task_id" not in info:
        raise CheckFailed("reset() info must hold 'task_id' (None for an env without tasks)")
    if not env.observation_space.contains(observation):
        raise CheckFailed(f"reset() observation ({len(observation)} chars) is not in {env.observation_space}")
    tasks = getattr(env.unwrapped, "tasks", None)
    if tasks is not None and len(tasks) > 1:
        task = tasks[len(tasks) - 1]
        _, info = env.reset(seed=seed, options={"task": task})
        if info.get("task_id") != task.id:
            raise CheckFailed(f"reset(options={{'task': <Task {task.id}>}}) started task {info.get('task_id')!r}")
        _, info = env.reset(seed=seed, options={"task": task.id})
        if info.get("task_id") != task.id:
            raise CheckFailed(f"reset(options={{'task': {task.id!r}}}) started task {info.get('task_id')!r}")


def _check_action_type(env: Any, seed: int) -> None:
    env.reset(seed=seed)
    for bad in (123, None, b"<answer>x</answer>", ["<answer>x</answer>"], {"text": "x"}):
        try:
            env.step(bad)
        except TypeError:
            continue
        except Exception as exc:  # noqa: BLE001
            raise CheckFailed(f"step({bad!r}) must raise TypeError, raised {type(exc).__name__}: {exc}") from exc
        raise CheckFailed(f"step({bad!r}) must raise TypeError (actions are str), but it returned normally")


def _public(info: dict) -> dict:
    return {k: info[k] for k in _COMPARED_INFO if k in info}


def _play(env: Any, seed: int, script: list[tuple[str, str]] | None, n_steps: int = 24) -> tuple[list, list]:
    """One transcript from ``reset(seed)``. With ``script=None`` the actions are chosen here (about half
    from the env's expert, if it has one) and returned as ``(source, text)`` for a replay. A replay asks
    the expert again where the script did, since ``expert_action`` may draw from the env's RNG."""
    observation, info = env.reset(seed=seed)
    rows: list[Any] = [("reset", observation, _public(info))]
    chooser = RandomActions(random.Random(seed), getattr(env, "accepted_actions", ACTION_KINDS))
    chosen: list[tuple[str, str]] = []
    use_expert = True
    for i in range(n_steps if script is None else len(script)):
        if script is not None:
            source, action = script[i]
            if source == "expert":
                action = env.unwrapped.expert_action(1.0)
        else:
            source, action = "random", None
            if use_expert and chooser.rng.random() < 0.5:
                try:
                    source, action = "expert", env.unwrapped.expert_action(1.0)
                except NotImplementedError:
                    use_expert = False
            if action is None:
                source, action = "random", chooser.next(admissible(info))
            chosen.append((source, action))
        observation, reward, terminated, truncated, info = env.step(action)
        chooser.observe(observation)
        rows.append(("step", action, observation, reward, terminated, truncated, _public(info)))
        if terminated or truncated:
            observation, info = env.reset(seed=seed + i + 1)
            rows.append(("reset", observation, _public(info)))
    rows.append(("state", env.state()))
    return rows, (chosen if script is None else script)


def _where_differs(x: Any, y: Any, path: str) -> str:
    """``path: x vs y`` at the first place two JSON-like values differ."""
    if isinstance(x, dict) and isinstance(y, dict):
        for key in list(x) + [k for k in y if k not in x]:
            if key not in x or key not in y:
                return f"{path}[{key!r}] is only in {'the first' if key in x else 'the second'}"
            if x[key] != y[key]:
                return _where_differs(x[key], y[key], f"{path}[{key!r}]")
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        for i, (a, b) in enumerate(zip(x, y, strict=False)):
            if a != b:
                return _where_differs(a, b, f"{path}[{i}]")
        if len(x) != len(y):
            return f"{path} has {len(x)} vs {len(y)} items"
    if isinstance(x, str) and isinstance(y, str):
        at = next((i for i, (a, b) in enumerate(zip(x, y, strict=False)) if a != b), min(len(x), len(y)))
        return f"{path} differs at char {at}: {x[max(0, at - 30):at + 50]!r} vs {y[max(0, at - 30):at + 50]!r}"
    return f"{path}: {str(x)[:120]!r} vs {str(y)[:120]!r}"


def _first_difference(a: list, b: list) -> str | None:
    labels = {"reset": ("observation", "info"), "step": ("action", "observation", "reward", "terminated",
                                                        "truncated", "info"), "state": ("state",)}
    for i, (row_a, row_b) in enumerate(zip(a, b, strict=False)):
        if row_a != row_b:
            for label, x, y in zip(labels[row_a[0]], row_a[1:], row_b[1:], strict=False):
                if x != y:
                    return f"row {i} ({row_a[0]}): " + _where_differs(x, y, label)
    if len(a) != len(b):
        return f"transcripts have different lengths ({len(a)} vs {len(b)})"
    return None


def _check_determinism(env: Any, build: Callable[[], Any] | None, seed: int) -> list[str]:
    first, actions = _play(env, seed, None)
    again, _ = _play(env, seed, actions)
    diff = _first_difference(first, again)
    if diff:
        raise CheckFailed(f"same seed and actions on the same instance gave a different episode: {diff}")
    if build is None:
        return ["checked on one instance only (pass an env id to also compare a fresh instance)"]
    fresh = build()
    try:
        other, _ = _play(fresh, seed, actions)
    finally:
        fresh.close()
    diff = _first_difference(first, other)
    if diff:
        raise CheckFailed(f"same seed and actions on a fresh instance gave a different episode: {diff}")
    return []


def _check_reset_clean(env: Any, seed: int) -> None:
    observation, info = env.reset(seed=seed)
    start = (observation, _public(info), env.state())
    _play(env, seed + 1, None, n_steps=10)
    observation, info = env.reset(seed=seed)
    again = (observation, _public(info), env.state())
    for label, x, y in zip(("observation", "info", "state"), start, again, strict=True):
        if x != y:
            raise CheckFailed(f"reset(seed={seed}) after an episode differs from the first reset "
                              f"(state leaks across episodes): {_where_differs(x, y, label)}")


def _check_state_json(env: Any) -> str | None:
    state = env.state()
    if not isinstance(state, dict):
        return f"state() must return a dict, got {type(state).__name__}"
    try:
        json.dumps(state, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"state() is not JSON-serialisable: {exc}"
    return None


_CHECK_OF_PROBLEM = {"reward_type": "rewards", "reward_finite": "rewards", "reward_range": "rewards",
                     "info_success": "info", "info_success_type": "info", "info_reward_terms": "info",
                     "reward_terms_type": "info", "reward_terms_sum": "info", "info_type": "info"}
_FUZZ_CHECKS = ("garbage_actions", "step_types", "rewards", "info", "state_json")


def _fuzz(env: Any, n_random: int, seed: int, report: CheckReport) -> list[CheckResult]:
    """Send adversarial then random actions; every step is checked against the contract."""
    rng = random.Random(seed)
    chooser = RandomActions(rng, getattr(env, "accepted_actions", ACTION_KINDS))
    chooser.observe(env.unwrapped.system_prompt() if hasattr(env.unwrapped, "system_prompt") else "")
    found: dict[str, list[str]] = {name: [] for name in _FUZZ_CHECKS}
    counts = dict.fromkeys(_FUZZ_CHECKS, 0)

    def record(check: str, message: str) -> None:
        counts[check] += 1
        if len(found[check]) < _EXAMPLES and message not in found[check]:
            found[check].append(message)

    plan: list[tuple[str, str | None]] = adversarial_actions() + [(f"random #{i}", None) for i in range(n_random)]
    info: dict = {}
    episode_steps = 0
    slowest = (0.0, "")
    needs_reset = True
    for label, action in plan:
        if needs_reset:
            try:
                _, info = env.reset(seed=rng.randrange(2**31))
            except Exception as exc:  # noqa: BLE001
                record("garbage_actions", f"reset() after [{label}] {_exc_text(exc)}")
                continue
            needs_reset, episode_steps = False, 0
        action = action if action is not None else chooser.next(admissible(info))
        started = time.perf_counter()
        try:
            result = env.step(action)
        except Exception as exc:  # noqa: BLE001 - the point of this check
            record("garbage_actions", f"step({_show(action)}) [{label}] {_exc_text(exc)}")
            needs_reset = True
            continue
        slowest = max(slowest, (time.perf_counter() - started, label))
        report.actions += 1
        for key, message in step_problems(result, env.reward_range):
            record(_CHECK_OF_PROBLEM.get(key, "step_types"), f"{message} [after {label}: {_show(action)}]")
        observation, _, terminated, truncated, info = result
        if not isinstance(info, dict):
            info = {}
        if isinstance(observation, str):
            chooser.observe(observation)
        episode_steps += 1
        if terminated is True or truncated is True or episode_steps >= _MAX_EPISODE_STEPS or episode_steps % 25 == 0:
            problem = _check_state_json(env)
            if problem:
                record("state_json", f"{problem} [after {label}]")
            needs_reset = terminated is True or truncated is True or episode_steps >= _MAX_EPISODE_STEPS
    results = []
    for name in _FUZZ_CHECKS:
        if counts[name]:
            results.append(CheckResult(name, False, f"{counts[name]} problem(s); e.g. " + " | ".join(found[name])))
        else:
            results.append(CheckResult(name, True))
    if slowest[0] > 1.0:
        results[0].notes.append(f"slowest action took {slowest[0]:.1f} s: [{slowest[1]}]")
    return results


def _check_gymnasium(build: Callable[[], Any] | None, env: Any) -> list[str]:
    from gymnasium.utils.env_checker import check_env as gymnasium_check_env

    if build is not None:
        fresh = build()
        try:
            return _check_gymnasium(None, fresh)
        finally:
            fresh.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gymnasium_check_env(env.unwrapped, skip_close_check=True)
        except AssertionError as exc:
            raise CheckFailed(f"gymnasium.utils.env_checker.check_env failed: {exc}") from exc
    # Envs built by agentic-rl have no Gymnasium EnvSpec, so this Gymnasium note is expected.
    notes = {str(w.message) for w in caught if "not having a spec" not in str(w.message)}
    return [f"gymnasium warned: {n[:200]}" for n in sorted(notes)]


def _check_close(env: Any) -> None:
    env.close()
    try:
        env.close()
    except Exception as exc:  # noqa: BLE001
        raise CheckFailed(f"close() must be safe to call twice; the second call {_exc_text(exc)}") from exc
