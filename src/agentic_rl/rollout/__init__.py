"""Multi-turn rollouts: trajectories, the token ledger, and the batched engine driver."""

from agentic_rl.rollout.trajectory import Segment, Trajectory, Turn, iter_jsonl, load_jsonl, save_jsonl

__all__ = ["Segment", "Trajectory", "Turn", "iter_jsonl", "load_jsonl", "save_jsonl"]
