"""Env task files: a wrong-typed ``data`` value is named by file, line, field and value before any episode."""

from __future__ import annotations

import json

import pytest

from agentic_rl.envs.tool_use import ToolUseEnv
from agentic_rl.envs.tool_use_tasks import generate_tasks as tool_use_tasks
from agentic_rl.envs.workflow import WorkflowEnv
from agentic_rl.envs.workflow_tasks import generate_tasks as workflow_tasks
from agentic_rl.tasks.core import TaskFileError


def _write(tmp_path, task_dict, edit):
    row = json.loads(json.dumps(task_dict))
    edit(row["data"])
    path = tmp_path / "tasks.jsonl"
    path.write_text("# my tasks\n" + json.dumps(row) + "\n")
    return path


def _kb_list(data):
    entity = next(iter(data["kb"]))
    data["kb"][entity]["population"] = [1, 2]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (_kb_list, r"tasks\.jsonl:2: field 'data\.kb\.\w+\.population' must be a number or a string, got \[1, 2\]"),
    ],
    ids=["kb value a list"],
)
def test_tool_use_data_errors_name_line_and_field(tmp_path, edit, needle):
    task = next(t for t in tool_use_tasks(0) if t.data["family"] == "lookup" and "population" in
                next(iter(t.data["kb"].values())))
    with pytest.raises(TaskFileError, match=needle):
        ToolUseEnv(tasks=_write(tmp_path, task.to_dict(), edit), split=None)


def _first_order(data):
    return data["world"]["orders"][0]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: _first_order(d)["items"][0].__setitem__("price", "56"),
         r"'data\.world\.orders\[0\]\.items\[0\]\.price' must be a number, got '56'"),
        (lambda d: _first_order(d).__setitem__("status", "lost"), r"'data\.world\.orders\[0\]\.status' .*got 'lost'"),
        (lambda d: _first_order(d).__setitem__("customer", "C000"),
         r"'data\.world\.orders\[0\]\.customer' names no customer .*got 'C000'"),
        (lambda d: d["goal"].__setitem__("refunds", {_first_order(d)["id"]: "ten"}),
         r"'data\.goal\.refunds\.\w+' must be a positive number, got 'ten'"),
        (lambda d: d["goal"]["mails"].append({"to": 7, "keyword": "x"}), r"'data\.goal\.mails\[\d\]\.to' must be a string"),
    ],
    ids=["price a string", "unknown status", "unknown customer", "refund a string", "mail to a number"],
)
def test_workflow_data_errors_name_line_field_and_value(tmp_path, edit, needle):
    path = _write(tmp_path, workflow_tasks(0)[0].to_dict(), edit)
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:2: field " + needle):
        WorkflowEnv(tasks=path, split=None)


def test_shell_task_file_errors_name_line_field_and_value(tmp_path):
    from agentic_rl.envs import shell_tasks
    from agentic_rl.envs.shell import ShellEnv

    generated = next(iter(shell_tasks.shell_tasks())).to_dict()
    path = _write(tmp_path, generated, lambda d: d.__setitem__("seed", True))
    with pytest.raises(TaskFileError, match=r"tasks\.jsonl:2: 'data\.seed' must be an integer, got True"):
        ShellEnv(path, backend="none")


def test_an_unknown_data_key_is_named_with_a_suggestion_and_the_task_still_loads(tmp_path):
    from agentic_rl.envs.task_data import UnknownTaskFieldWarning

    task = next(t for t in tool_use_tasks(0) if t.data["family"] == "calc")
    path = _write(tmp_path, task.to_dict(), lambda d: d.update(neded=d.pop("needed"), source="my notes"))
    with pytest.warns(UnknownTaskFieldWarning) as caught:
        env = ToolUseEnv(tasks=path, split=None)
    messages = sorted(str(w.message) for w in caught)
    assert any("tasks.jsonl:2: 'data.neded'" in m and "did you mean 'data.needed'" in m for m in messages)
    assert any("'data.source'" in m for m in messages)
    assert len(env.tasks) == 1
