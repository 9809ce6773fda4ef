"""Evaluation: held-out success with confidence intervals, robustness, before/after comparison,
failure analysis and the reward-hacking audit."""

from agentic_rl.evaluate.audit import AuditFlag, AuditReport, audit, detect_action_hacks, reward_shares
from agentic_rl.evaluate.compare import Comparison, compare
from agentic_rl.evaluate.failures import CATEGORIES, FailureReport, analyze_failures, categorize
from agentic_rl.evaluate.harness import evaluate, play_agent, resolve_tasks
from agentic_rl.evaluate.result import EvalResult, EvalSummary, summarize
from agentic_rl.evaluate.stats import mcnemar_exact, pass_at_k, two_proportion_p, wilson_interval

__all__ = [
    "CATEGORIES", "AuditFlag", "AuditReport", "Comparison", "EvalResult", "EvalSummary", "FailureReport",
    "analyze_failures", "audit", "categorize", "compare", "detect_action_hacks", "evaluate", "mcnemar_exact",
    "pass_at_k", "play_agent", "resolve_tasks", "reward_shares", "summarize", "two_proportion_p", "wilson_interval",
]
