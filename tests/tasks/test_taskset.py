import json

import pytest

from agentic_rl.tasks import Task, TaskFileError, TaskSet


def test_round_trip_and_views(tmp_path):
    ts = TaskSet([Task("a", "p1", {"x": 1}, 0, "train"), Task("b", "p2", {}, 2, "test", tags=("t",))])
    ts.save(tmp_path / "t.jsonl")
    back = TaskSet.load(tmp_path / "t.jsonl")
    assert [t.to_dict() for t in back] == [t.to_dict() for t in ts]
    assert back.levels() == [0, 2] and len(back.split("test")) == 1 and back.get("b").tags == ("t",)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"prompt": "p"}), "'id'"),
        (json.dumps({"id": "x", "prompt": "p", "difficulty": -1}), "'difficulty'"),
        (json.dumps({"id": "x", "prompt": "p", "data": []}), "'data'"),
        (json.dumps({"id": "x", "prompt": "p", "colour": 1}), "colour"),
    ],
)
def test_malformed_line_names_line_and_field(tmp_path, line, needle):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "ok", "prompt": "fine"}) + "\n\n" + line + "\n")
    with pytest.raises(TaskFileError) as err:
        TaskSet.load(path)
    assert f"{path}:3" in str(err.value) and needle in str(err.value)


def test_duplicate_ids_rejected():
    with pytest.raises(TaskFileError, match="duplicate"):
        TaskSet([Task("a", "p"), Task("a", "q")])
