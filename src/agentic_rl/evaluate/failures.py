"""Failure analysis: every failed episode gets exactly one category, with counts and an example each.

Categories, checked in this order (the first that matches wins, so infrastructure problems are not
blamed on the policy, and a parse-error storm is not called a wrong answer):

1. ``env_error``     the env crashed or timed out (``termination`` ``error:<kind>``, or a turn with
                     ``info["error"]`` ``env_error`` / ``timeout``).
2. ``parse_error``   at least half of the turns could not be parsed as an action.
3. ``loop``          the same action text three times in a row, or two ``repeated_action`` errors.
4. ``wrong_tool``    at least a third of the turns called an unknown tool or an inadmissible action.
5. ``tool_error``    at least a third of the turns had a failing tool call (``tool_error``,
                     ``bad_arguments``).
6. ``wrong_answer``  the episode ended on the agent's own final action (terminated, not truncated)
                     and the success check failed.
7. ``out_of_steps``  the step budget ran out (``truncated``) or the episode stopped without an end.
8. ``other``         none of the above (e.g. an episode with no turns).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentic_rl.monitor.rollout_metrics import episode_error_kind, turn_error

if TYPE_CHECKING:
    from agentic_rl.rollout.trajectory import Trajectory

CATEGORIES = ("env_error", "parse_error", "loop", "wrong_tool", "tool_error", "wrong_answer", "out_of_steps",
              "other")
DESCRIPTIONS = {
    "env_error": "env crash or timeout",
    "parse_error": "most turns were not a parseable action",
    "loop": "repeated the same action",
    "wrong_tool": "unknown tool or inadmissible action",
    "tool_error": "tool calls failed (bad arguments / tool error)",
    "wrong_answer": "finished with a wrong final answer",
    "out_of_steps": "ran out of steps",
    "other": "other",
}
_WRONG_TOOL = frozenset({"unknown_tool", "invalid_action"})
_TOOL_FAIL = frozenset({"tool_error", "bad_arguments"})


def longest_identical_run(actions: Sequence[str]) -> int:
    """Length of the longest run of consecutive identical (whitespace-normalised) action texts."""
    best = run = 0
    previous: str | None = None
    for action in actions:
        norm = " ".join(action.split())
        run = run + 1 if norm == previous else 1
        previous = norm
        best = max(best, run)
    return best


def categorize(traj: Trajectory) -> str:
    """The failure category of one episode (meaningful for failed episodes; see the module docstring)."""
    if episode_error_kind(traj) is not None:
        return "env_error"
    n = traj.num_turns
    if n == 0:
        return "other"
    errors = Counter(turn_error(t) for t in traj.turns)
    if errors["parse_error"] * 2 >= n:
        return "parse_error"
    if longest_identical_run([t.action for t in traj.turns]) >= 3 or errors["repeated_action"] >= 2:
        return "loop"
    if sum(errors[k] for k in _WRONG_TOOL) * 3 >= n:
        return "wrong_tool"
    if sum(errors[k] for k in _TOOL_FAIL) * 3 >= n:
        return "tool_error"
    last = traj.turns[-1]
    if traj.termination == "failed" and last.terminated and not last.truncated:
        return "wrong_answer"
    if traj.termination in ("truncated", "failed"):
        return "out_of_steps"
    return "other"


@dataclass
class FailureReport:
    """Failed episodes by category: ``counts`` (category → n) and one ``examples`` trajectory each."""

    total_episodes: int = 0
    failed: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, Trajectory] = field(default_factory=dict)

    def to_dict(self, with_examples: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"total_episodes": self.total_episodes, "failed": self.failed,
                               "counts": dict(self.counts)}
        if with_examples:
            out["examples"] = {k: v.to_dict() for k, v in self.examples.items()}
        return out

    def table(self) -> list[dict[str, Any]]:
        """Rows ``{category, description, count, share}`` in category order, only non-empty ones."""
        return [{"category": c, "description": DESCRIPTIONS[c], "count": self.counts[c],
                 "share": self.counts[c] / self.failed if self.failed else 0.0}
                for c in CATEGORIES if self.counts.get(c)]


def analyze_failures(trajs: Sequence[Trajectory]) -> FailureReport:
    """Group the failed episodes of ``trajs``; the example per category is its shortest episode."""
    report = FailureReport(total_episodes=len(trajs))
    for traj in trajs:
        if traj.success:
            continue
        report.failed += 1
        category = categorize(traj)
        report.counts[category] = report.counts.get(category, 0) + 1
        current = report.examples.get(category)
        if current is None or traj.num_turns < current.num_turns:
            report.examples[category] = traj
    report.counts = {c: report.counts[c] for c in CATEGORIES if c in report.counts}
    return report
