"""The environment layer: contract, registry, wrappers, checkers and the parallel env pool."""

from agentic_rl.env.core import Env, TextSpace
from agentic_rl.env.registry import EnvSpec, make, register, registered, spec

__all__ = ["Env", "EnvSpec", "TextSpace", "make", "register", "registered", "spec"]
