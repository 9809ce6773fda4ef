"""Training reads a task file through the env's own loader: bad task data is named before any episode."""

from __future__ import annotations

import json

import pytest

from agentic_rl.env import task_set
from agentic_rl.envs.tool_use_tasks import generate_tasks
from agentic_rl.tasks.core import TaskFileError
from agentic_rl.train.setup import split_tasks


def test_a_task_file_keeps_every_split(tmp_path):
    path = tmp_path / "mine.jsonl"
    generate_tasks(seed=0, n_per_family=4, families=("calc", "lookup")).save(path)
    tasks = task_set("tool-use-v0", {"max_steps": 4}, str(path))
    assert tasks.splits() == ["test", "train"]
    train, heldout = split_tasks(tasks, "train", "test")
    assert len(train) + len(heldout) == 8


def test_bad_task_data_is_named_by_file_line_and_field(tmp_path):
    rows = [t.to_dict() for t in generate_tasks(seed=0, n_per_family=2, families=("calc",))]
    del rows[1]["data"]["answer"]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskFileError, match=r"mine\.jsonl:2.*answer"):
        task_set("tool-use-v0", None, str(path))
