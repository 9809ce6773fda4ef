"""agentic-rl: train LLM agents with RL in sandboxed, resettable environments.

From imitation (SFT on demonstrations) to strategy (RL from the environment's own feedback).
"""

from agentic_rl.env import Env, make, register, registered

__version__ = "0.1.0"
__all__ = ["Env", "make", "register", "registered", "__version__"]
