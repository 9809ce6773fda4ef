"""Per-iteration rollout metrics from a batch of trajectories (what the trainer logs every iteration).

Definitions (a user reading the curves needs them):

- ``reward/mean|std|min|max``: over episodes, of the episode's total (undiscounted) reward.
- ``success/<split>``: fraction of episodes whose independent success check passed;
  ``success/level_<k>``: the same among episodes at difficulty ``k``.
- ``rollout/turns``: mean turns per episode; ``rollout/turns_success``: the same over successful episodes
  (how efficiently tasks get solved; absent without a success); ``rollout/response_tokens``: mean
  policy-sampled tokens per episode (from the token ledger, or the turns' token ids when the ledger is
  absent).
- ``rollout/explored_turns``: fraction of turns whose action started with an opener forced by kind
  exploration (``rollout.explore_kinds``).
- ``actions/<kind>``: fraction of all turns whose parsed action kind was ``<kind>`` (``invalid`` for
  unparseable turns).
- ``rollout/parse_error_rate``, ``rollout/invalid_action_rate``, ``rollout/repeated_action_rate``: fraction
  of turns with that ``info["error"]``; ``rollout/tool_error_rate``: failed tool calls (``tool_error``,
  ``unknown_tool``, ``bad_arguments``) over tool calls.
- ``rollout/env_error_rate``, ``rollout/timeout_rate``: fraction of *episodes* that hit an env error /
  a timeout (``termination`` ``error:<kind>`` or such a turn); ``rollout/truncated_rate`` likewise.
- ``reward_terms/<term>``: mean per episode of the term's summed value.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentic_rl.rollout.trajectory import Trajectory, Turn

TOOL_ERRORS = frozenset({"tool_error", "unknown_tool", "bad_arguments"})
TIMEOUT_KINDS = frozenset({"timeout"})


def turn_error(turn: Turn) -> str | None:
    """The turn's ``info["error"]`` kind, or ``None``."""
    error = turn.info.get("error") if isinstance(turn.info, dict) else None
    return str(error) if error else None


def action_kind(turn: Turn) -> str:
    """The parsed action kind the env reported (``invalid`` for unparseable turns, ``unknown`` if absent)."""
    kind = turn.info.get("action_kind") if isinstance(turn.info, dict) else None
    if kind:
        return str(kind)
    return "invalid" if turn_error(turn) == "parse_error" else "unknown"


def episode_error_kind(traj: Trajectory) -> str | None:
    """``timeout`` / ``env_error`` / another error kind when the episode hit an infrastructure failure."""
    if traj.termination.startswith("error:"):
        return traj.termination.split(":", 1)[1] or "env_error"
    for turn in traj.turns:
        err = turn_error(turn)
        if err in TIMEOUT_KINDS or err == "env_error":
            return err
    return None


def response_tokens(traj: Trajectory) -> int:
    """Tokens the policy sampled in this episode (ledger first, per-turn token ids as a fallback)."""
    if traj.segments:
        return traj.num_sampled_tokens
    return sum(len(t.token_ids) for t in traj.turns)


def trajectory_metrics(trajs: Sequence[Trajectory], split: str = "train") -> dict[str, float]:
    """Metrics of one batch of episodes (see the module docstring for each name). Empty input → ``{}``."""
    if not trajs:
        return {}
    n = len(trajs)
    rewards = [t.total_reward for t in trajs]
    wins = [t for t in trajs if t.success]
    mean = sum(rewards) / n
    out: dict[str, float] = {
        "reward/mean": mean,
        "reward/std": math.sqrt(sum((r - mean) ** 2 for r in rewards) / n),
        "reward/min": min(rewards),
        "reward/max": max(rewards),
        f"success/{split}": sum(bool(t.success) for t in trajs) / n,
        "rollout/episodes": float(n),
        "rollout/turns": sum(t.num_turns for t in trajs) / n,
        "rollout/response_tokens": sum(response_tokens(t) for t in trajs) / n,
    }
    if wins:
        out["rollout/turns_success"] = sum(t.num_turns for t in wins) / len(wins)
    out.update(_level_success(trajs))
    out.update(_turn_rates(trajs))
    errors = [episode_error_kind(t) for t in trajs]
    out["rollout/timeout_rate"] = sum(e in TIMEOUT_KINDS for e in errors) / n
    out["rollout/env_error_rate"] = sum(e is not None and e not in TIMEOUT_KINDS for e in errors) / n
    out["rollout/truncated_rate"] = sum(t.termination == "truncated" for t in trajs) / n
    terms: dict[str, float] = defaultdict(float)
    for traj in trajs:
        for turn in traj.turns:
            for term, value in (turn.reward_terms or {}).items():
                terms[term] += float(value)
    out.update({f"reward_terms/{term}": total / n for term, total in sorted(terms.items())})
    return out


def _level_success(trajs: Sequence[Trajectory]) -> dict[str, float]:
    by_level: dict[int, list[bool]] = defaultdict(list)
    for traj in trajs:
        by_level[int(traj.difficulty)].append(bool(traj.success))
    return {f"success/level_{k}": sum(v) / len(v) for k, v in sorted(by_level.items())}


def _turn_rates(trajs: Sequence[Trajectory]) -> dict[str, float]:
    turns = [turn for traj in trajs for turn in traj.turns]
    if not turns:
        return {"rollout/parse_error_rate": 0.0, "rollout/invalid_action_rate": 0.0,
                "rollout/repeated_action_rate": 0.0, "rollout/tool_error_rate": 0.0}
    kinds = Counter(action_kind(t) for t in turns)
    explored = sum(bool(t.explored) for t in turns) / len(turns)
    errors = Counter(turn_error(t) for t in turns)
    tool_calls = sum(1 for t in turns if action_kind(t) == "tool_call" or turn_error(t) in TOOL_ERRORS)
    tool_failures = sum(errors[k] for k in TOOL_ERRORS)
    out = {f"actions/{kind}": count / len(turns) for kind, count in sorted(kinds.items())}
    out["rollout/parse_error_rate"] = errors["parse_error"] / len(turns)
    out["rollout/invalid_action_rate"] = errors["invalid_action"] / len(turns)
    out["rollout/repeated_action_rate"] = errors["repeated_action"] / len(turns)
    out["rollout/tool_error_rate"] = tool_failures / tool_calls if tool_calls else 0.0
    out["rollout/explored_turns"] = explored
    return out
