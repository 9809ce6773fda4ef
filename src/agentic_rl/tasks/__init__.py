"""Tasks, task sets (JSONL, difficulty levels, splits) and samplers."""

from agentic_rl.tasks.core import Task, TaskFileError, TaskSet

__all__ = ["Task", "TaskFileError", "TaskSet"]
