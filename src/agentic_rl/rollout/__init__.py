"""Multi-turn rollouts: trajectories, the token ledger, the batched engine and the driver."""

from agentic_rl.rollout.driver import rollout
from agentic_rl.rollout.engine import Engine, RolloutEngine, SamplingParams, TurnOutput
from agentic_rl.rollout.ledger import LedgerBuilder
from agentic_rl.rollout.trajectory import Segment, Trajectory, Turn, iter_jsonl, load_jsonl, save_jsonl

__all__ = [
    "Engine",
    "LedgerBuilder",
    "RolloutEngine",
    "SamplingParams",
    "Segment",
    "Trajectory",
    "Turn",
    "TurnOutput",
    "iter_jsonl",
    "load_jsonl",
    "rollout",
    "save_jsonl",
]
