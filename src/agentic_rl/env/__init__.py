"""The environment layer: contract, registry, wrappers, checkers and the parallel env pool."""

from agentic_rl.env.check import CheckReport, CheckResult, EnvCheckError, check_env
from agentic_rl.env.checker import EnvContractWarning, PassiveChecker
from agentic_rl.env.core import Env, TextSpace
from agentic_rl.env.pool import EnvPool, StepRecord
from agentic_rl.env.registry import (
    EnvSpec,
    UnknownEnvError,
    make,
    register,
    registered,
    spec,
    task_set,
    unregister,
)
from agentic_rl.env.wrappers import (
    IllegalActionPenalty,
    RecordEpisode,
    RewardShaping,
    StepTimeout,
    TextWrapper,
    TimeLimit,
)

__all__ = [
    "CheckReport", "CheckResult", "Env", "EnvCheckError", "EnvContractWarning", "EnvPool", "EnvSpec",
    "IllegalActionPenalty", "PassiveChecker", "RecordEpisode", "RewardShaping", "StepRecord", "StepTimeout",
    "TextSpace", "TextWrapper", "TimeLimit", "UnknownEnvError", "check_env", "make", "register", "registered",
    "spec", "task_set", "unregister",
]
