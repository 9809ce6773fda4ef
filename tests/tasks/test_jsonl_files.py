"""Task files as users write them: encodings, line ends, repeated keys and ids, empty files."""

from __future__ import annotations

import json

import pytest

from agentic_rl.tasks import TaskFileError, TaskSet

GOOD = json.dumps({"id": "a", "prompt": "Café?", "data": {"answer": 1}})


@pytest.mark.parametrize(
    ("second_line", "needle"),
    [
        (b'{"id": "b", "prompt": "caf\xe9"}', r"bad\.jsonl:2: not valid UTF-8 \(byte 0xe9 at column 27\)"),
        (b'{"id": "b", "prompt": "p", "id": "c"}', r"bad\.jsonl:2: key 'id' appears twice"),
        (GOOD.encode(), r"bad\.jsonl:2: duplicate task id 'a' \(first on line 1\)"),
    ],
    ids=["latin-1 byte", "repeated key", "repeated id"],
)
def test_bad_line_is_named_by_file_and_line(tmp_path, second_line, needle):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + second_line + b"\n")
    with pytest.raises(TaskFileError, match=needle):
        TaskSet.load(path)


def test_bom_and_crlf_lose_nothing(tmp_path):
    path = tmp_path / "windows.jsonl"
    second = json.dumps({"id": "b", "prompt": "p", "split": "test"})
    path.write_bytes(b"\xef\xbb\xbf" + f"{GOOD}\r\n# note\r\n\r\n{second}\r\n".encode())
    tasks = TaskSet.load(path)
    assert [t.id for t in tasks] == ["a", "b"] and tasks[0].prompt == "Café?" and tasks.splits() == ["test", "train"]


def test_file_without_tasks_or_not_a_file_is_named(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("# only a comment\n\n")
    with pytest.raises(TaskFileError, match=r"empty\.jsonl: no tasks"):
        TaskSet.load(path)
    with pytest.raises(TaskFileError, match="not a file"):
        TaskSet.load(tmp_path)
