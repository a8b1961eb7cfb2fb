"""Unit tests for task pools (maigym_ray/tasks/pool.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from maigym_ray.actions import parse_action
from maigym_ray.apps.registry import APP_CLASSES
from maigym_ray.envs.backends.desktop import DESKTOP_APPS
from maigym_ray.errors import TaskError
from maigym_ray.tasks.pool import SCHEMA, TaskPool, task_from_dict, task_to_row
from maigym_ray.tasks.verifiers import build_verifier
from maigym_ray.types import PLATFORMS, TaskSpec

pytestmark = pytest.mark.unit

ANSWER_1 = {"name": "checks", "params": {"checks": [{"op": "answer", "any_of": ["1"]}]}}

SIX_APPS = ("train", "ride", "food", "mail", "calendar", "contacts")


@pytest.fixture(scope="module")
def builtin() -> TaskPool:
    return TaskPool.builtin()


def _row(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": "t-1",
        "instruction": "Do the thing.",
        "apps": ["food"],
        "verifier": {"name": "checks", "params": {"checks": [{"op": "answer", "any_of": ["1"]}]}},
    }
    row.update(overrides)
    return {k: v for k, v in row.items() if v is not ...}


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------------------------------------------
# builtin pool
# --------------------------------------------------------------------------------------------------------------


def test_builtin_pool_size_and_app_coverage(builtin: TaskPool) -> None:
    assert len(builtin) >= 30
    per_app = Counter(app for t in builtin for app in t.apps)
    for app in SIX_APPS:
        assert per_app[app] >= 5, app
    assert set(SIX_APPS) <= set(APP_CLASSES)


def test_builtin_ids_unique(builtin: TaskPool) -> None:
    ids = [t.id for t in builtin]
    assert len(ids) == len(set(ids)) == len(builtin)
    for task_id in ids:
        assert task_id in builtin
        assert builtin.get(task_id).id == task_id


def test_builtin_tasks_are_well_formed(builtin: TaskPool) -> None:
    for t in builtin:
        assert t.instruction.strip(), t.id
        assert t.apps and set(t.apps) <= set(APP_CLASSES), t.id
        assert t.platforms and set(t.platforms) <= set(PLATFORMS), t.id
        assert not t.start_app or t.start_app in t.apps, t.id
        assert t.max_steps >= 1, t.id
        assert t.verifier.get("name"), t.id
        build_verifier(t.verifier)  # raises on a malformed spec


def test_builtin_golden_solutions_parse(builtin: TaskPool) -> None:
    for t in builtin:
        assert len(t.golden) >= 1, t.id
        assert len(t.golden) <= t.max_steps, t.id
        for step in t.golden:
            action = parse_action(step)
            assert action.to_text()  # renders back
            if action.name == "open_app":  # desktops also have their own programs (editor, terminal)
                desktop_apps = DESKTOP_APPS if t.platforms == ("desktop",) else ()
                assert action.args["name"] in (*APP_CLASSES, *desktop_apps), (t.id, step)


def test_builtin_answer_tasks_end_with_answer(builtin: TaskPool) -> None:
    for t in builtin:
        ops = [c["op"] for c in t.verifier["params"]["checks"]]
        if "answer" in ops:
            assert parse_action(t.golden[-1]).name == "answer", t.id


# --------------------------------------------------------------------------------------------------------------
# Parquet round trip
# --------------------------------------------------------------------------------------------------------------


def test_parquet_round_trip_of_builtin(builtin: TaskPool, tmp_path: Path) -> None:
    path = tmp_path / "pool.parquet"
    builtin.save(path)
    assert pq.read_schema(path).names == SCHEMA.names
    loaded = TaskPool.load(path)
    assert [t.id for t in loaded] == [t.id for t in builtin]
    for a, b in zip(builtin, loaded, strict=True):
        assert a == b
        assert isinstance(b.apps, tuple) and isinstance(b.golden, tuple)


def test_parquet_round_trip_of_rich_task(tmp_path: Path) -> None:
    task = TaskSpec(
        id="x-1",
        instruction="Book — ünïcode ✓",
        apps=("train", "calendar"),
        platforms=("web", "android"),
        initial_state={"train": {"traveller": "Zoë", "bookings": []}, "calendar": {"events": [{"n": 1.5}]}},
        start_app="calendar",
        verifier={
            "name": "checks",
            "params": {"checks": [{"op": "answer", "any_of": ["7"], "numeric": True}]},
        },
        golden=('answer(text="7")',),
        max_steps=3,
        tags=("a", "b"),
        split="test",
    )
    minimal = TaskSpec(id="x-2", instruction="i", apps=("food",), verifier=ANSWER_1)
    path = tmp_path / "rich.parquet"
    TaskPool([task, minimal]).save(path)
    loaded = TaskPool.load(path)
    assert list(loaded) == [task, minimal]


def test_directory_load_reads_jsonl_and_parquet(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "a.jsonl", [_row(id="a-1")])
    TaskPool([task_from_dict(_row(id="b-1"))]).save(tmp_path / "b.parquet")
    pool = TaskPool.load(tmp_path)
    assert [t.id for t in pool] == ["a-1", "b-1"]


def test_task_to_row_json_encodes_nested_objects() -> None:
    t = task_from_dict(_row(initial_state={"food": {"address": "x"}}))
    row = task_to_row(t)
    assert set(row) == set(SCHEMA.names)
    assert json.loads(row["initial_state"]) == {"food": {"address": "x"}}
    assert json.loads(row["verifier"]) == t.verifier
    assert task_from_dict(row) == t


# --------------------------------------------------------------------------------------------------------------
# malformed files
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "field", "fragment"),
    [
        (_row(instruction=...), "instruction", "is missing"),
        (_row(instruction=""), "instruction", "is missing"),
        (_row(id=None), "id", "is missing"),
        (_row(verifier=...), "verifier", "is missing"),
        (_row(apps="food"), "apps", "must be a list of strings"),
        (_row(apps=["food", 3]), "apps", "must be a list of strings"),
        (_row(apps={"food": 1}), "apps", "must be a list of strings"),
        (_row(max_steps=-1), "max_steps", "must be a positive integer"),
        (_row(max_steps=0), "max_steps", "must be a positive integer"),
        (_row(max_steps=2.5), "max_steps", "must be a positive integer"),
        (_row(max_steps=True), "max_steps", "must be a positive integer"),
        (_row(max_steps="5"), "max_steps", "must be a positive integer"),
        (_row(difficulty="hard"), "difficulty", "is not a TaskSpec field"),
        (_row(platforms=["web", "ps5"]), "platforms", "unknown platform 'ps5'"),
        (_row(platforms="web"), "platforms", "must be a list of strings"),
        (_row(start_app="mail"), "start_app", "'mail' is not one of the task's apps"),
        (_row(start_app=3), "start_app", "must be a string"),
        (_row(id=7), "id", "must be a string"),
        (_row(verifier="{not json"), "verifier", "is not valid JSON"),
        (_row(verifier=["checks"]), "verifier", "must be an object"),
        (_row(initial_state=[1]), "initial_state", "must be an object"),
        (_row(golden='click(id="a")'), "golden", "must be a list of strings"),
        (_row(tags=[1]), "tags", "must be a list of strings"),
    ],
)
def test_malformed_jsonl_row_names_line_and_field(
    tmp_path: Path, bad: dict[str, Any], field: str, fragment: str
) -> None:
    path = _write_jsonl(tmp_path / "tasks.jsonl", [_row(id="ok-1"), "", bad])
    with pytest.raises(TaskError) as info:
        TaskPool.load(path)
    msg = str(info.value)
    assert str(path) in msg
    assert "line 3" in msg
    assert f"field {field!r}" in msg
    assert fragment in msg


@pytest.mark.parametrize("line", ["{not json", '{"id": "x",}', "[1, 2", "'single'"])
def test_bad_json_line_names_the_line(tmp_path: Path, line: str) -> None:
    path = _write_jsonl(tmp_path / "tasks.jsonl", [_row(id="ok-1"), line])
    with pytest.raises(TaskError) as info:
        TaskPool.load(path)
    assert f"{path} line 2: not valid JSON" in str(info.value)


@pytest.mark.parametrize("line", ["[1, 2]", '"task"', "3", "null"])
def test_non_object_line_is_task_error(tmp_path: Path, line: str) -> None:
    path = _write_jsonl(tmp_path / "tasks.jsonl", [line])
    with pytest.raises(TaskError, match="line 1: expected an object"):
        TaskPool.load(path)


def test_duplicate_ids_across_lines_are_task_error(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "tasks.jsonl", [_row(id="dup"), _row(id="dup")])
    with pytest.raises(TaskError, match="duplicate task id 'dup'"):
        TaskPool.load(path)


def test_missing_file_and_unreadable_parquet(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="does not exist"):
        TaskPool.load(tmp_path / "nope.jsonl")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"this is not parquet")
    with pytest.raises(TaskError, match="not a readable Parquet task file"):
        TaskPool.load(broken)


def test_jsonl_load_skips_blank_lines_and_keeps_order(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "t.jsonl", ["", _row(id="b"), "   ", _row(id="a", max_steps=3), ""])
    pool = TaskPool.load(path)
    assert [t.id for t in pool] == ["b", "a"]
    assert pool.get("a").max_steps == 3
    assert pool.get("b").max_steps == 20  # default
    assert pool.get("b").platforms == ("web",)


def test_task_from_dict_accepts_json_string_fields() -> None:
    t = task_from_dict(_row(verifier=json.dumps(ANSWER_1), initial_state='{"food": {}}'))
    assert t.verifier == ANSWER_1
    assert t.initial_state == {"food": {}}


# --------------------------------------------------------------------------------------------------------------
# lookup and filter
# --------------------------------------------------------------------------------------------------------------


def test_unknown_id_is_task_error(builtin: TaskPool) -> None:
    with pytest.raises(TaskError, match="unknown task 'nope'"):
        builtin.get("nope")
    assert "nope" not in builtin


def test_unknown_id_suggests_similar(builtin: TaskPool) -> None:
    with pytest.raises(TaskError) as info:
        builtin.get("train-does-not-exist")
    msg = str(info.value)
    assert "similar" in msg
    assert "train-" in msg.split("similar", 1)[1]


def _pool() -> TaskPool:
    return TaskPool(
        [
            task_from_dict(_row(id="f-1", apps=["food"], split="train")),
            task_from_dict(_row(id="f-2", apps=["food"], split="test", platforms=["mobile_web"])),
            task_from_dict(
                _row(id="fm-1", apps=["food", "mail"], split="train", platforms=["web", "android"])
            ),
            task_from_dict(_row(id="m-1", apps=["mail"], split="test")),
        ]
    )


def test_filter_by_split() -> None:
    pool = _pool()
    assert [t.id for t in pool.filter(split="train")] == ["f-1", "fm-1"]
    assert [t.id for t in pool.filter(split="test")] == ["f-2", "m-1"]
    assert len(pool.filter(split="val")) == 0


def test_filter_by_apps_keeps_tasks_whose_apps_are_all_allowed() -> None:
    pool = _pool()
    assert [t.id for t in pool.filter(apps=["food"])] == ["f-1", "f-2"]
    assert [t.id for t in pool.filter(apps=["food", "mail"])] == ["f-1", "f-2", "fm-1", "m-1"]
    assert len(pool.filter(apps=[])) == 0


def test_filter_combined_and_by_platform() -> None:
    pool = _pool()
    assert [t.id for t in pool.filter(split="test", apps=["food"])] == ["f-2"]
    assert [t.id for t in pool.filter(platform="android")] == ["fm-1"]
    assert [t.id for t in pool.filter(platform="web", split="train", apps={"food", "mail"})] == [
        "f-1",
        "fm-1",
    ]
    # filter returns a new pool and leaves the original alone
    assert len(pool) == 4


def test_filter_on_builtin(builtin: TaskPool) -> None:
    food = builtin.filter(apps=["food"])
    assert len(food) >= 5
    assert all(t.apps == ("food",) for t in food)
    assert len(builtin.filter(split="train")) + len(builtin.filter(split="test")) + len(
        builtin.filter(split="val")
    ) <= len(builtin)
    assert len(builtin.filter(split="train", apps=SIX_APPS)) == len(builtin.filter(split="train"))


def test_pool_rejects_duplicate_ids() -> None:
    t = task_from_dict(_row())
    with pytest.raises(TaskError, match="duplicate"):
        TaskPool([t, t])
