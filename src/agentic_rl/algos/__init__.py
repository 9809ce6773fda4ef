"""Advantage estimators and policy losses as registered pure functions (torch only, no I/O).

>>> from agentic_rl.algos import advantages, policy_loss
>>> adv = advantages("grpo")(rewards, masks, groups)          # [B, K] per-step advantages
>>> loss, metrics = policy_loss("ppo_clip")(logprobs, old_logprobs, token_adv, loss_mask)
"""

from agentic_rl.algos import estimators as _estimators  # noqa: F401  (registers the estimators)
from agentic_rl.algos import losses as _losses  # noqa: F401  (registers the losses)
from agentic_rl.algos.estimators import efficiency_bonus, steps_to_tokens
from agentic_rl.algos.losses import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    aggregate,
    aggregation_normalizer,
    explained_variance,
    kl_divergence,
    value_loss,
)
from agentic_rl.algos.registry import (
    advantages,
    policy_loss,
    register_advantage,
    register_policy_loss,
    registered_advantages,
    registered_policy_losses,
)

__all__ = [
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "advantages",
    "aggregate",
    "aggregation_normalizer",
    "efficiency_bonus",
    "explained_variance",
    "kl_divergence",
    "policy_loss",
    "register_advantage",
    "register_policy_loss",
    "registered_advantages",
    "registered_policy_losses",
    "steps_to_tokens",
    "value_loss",
]
