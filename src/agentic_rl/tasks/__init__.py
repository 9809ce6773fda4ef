"""Tasks, task sets (JSONL, difficulty levels, splits) and samplers."""

from agentic_rl.tasks.core import Task, TaskFileError, TaskSet, load_with_locations

__all__ = ["Task", "TaskFileError", "TaskSet", "load_with_locations"]
