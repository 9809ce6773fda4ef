"""Reward terms: composable term dicts, the seed's code-repair reward, and reward-hacking signals."""

from agentic_rl.rewards.code_repair import (
    SEED_WEIGHTS,
    CodeRepairWeights,
    code_repair_reward,
    introduces_new_error,
)
from agentic_rl.rewards.hacking import HACK_FLAGS, code_hack_flags, special_casing, workspace_hack_flags
from agentic_rl.rewards.terms import combine, neutralise, step_cost, total

__all__ = ["HACK_FLAGS", "SEED_WEIGHTS", "CodeRepairWeights", "code_hack_flags", "code_repair_reward", "combine",
           "introduces_new_error", "neutralise", "special_casing", "step_cost", "total", "workspace_hack_flags"]
