"""The shipped JSON Schema of a task row agrees with the loader (task_from_dict) and the Parquet schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maigym_ray.errors import TaskError
from maigym_ray.tasks.pool import BUILTIN_DIR, SCHEMA, task_from_dict

jsonschema = pytest.importorskip("jsonschema")

pytestmark = pytest.mark.unit

TASK_SCHEMA = json.loads((Path(BUILTIN_DIR).parent / "task.schema.json").read_text())


def test_schema_names_exactly_the_task_fields():
    jsonschema.Draft202012Validator.check_schema(TASK_SCHEMA)
    assert set(TASK_SCHEMA["properties"]) == set(SCHEMA.names)


def test_every_builtin_task_validates_and_loads():
    validator = jsonschema.Draft202012Validator(TASK_SCHEMA)
    rows = [
        json.loads(line) for f in sorted(BUILTIN_DIR.glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    assert rows
    for row in rows:
        assert not list(validator.iter_errors(row)), row["id"]
        task_from_dict(row)


@pytest.mark.parametrize(
    "change",
    [
        {"colour": "red"},  # unknown field
        {"apps": []},
        {"max_steps": 0},
        {"golden": "click(id=1)"},
        {"platforms": ["tv"]},
    ],
)
def test_schema_and_loader_reject_the_same_rows(change):
    row = {"id": "t", "instruction": "do it", "apps": ["notes"], "verifier": {"name": "checks", "params": {}}}
    validator = jsonschema.Draft202012Validator(TASK_SCHEMA)
    assert not list(validator.iter_errors(row))
    bad = {**row, **change}
    assert list(validator.iter_errors(bad))
    with pytest.raises(TaskError):
        task_from_dict(bad)
    missing = {k: v for k, v in row.items() if k != "instruction"}
    assert list(validator.iter_errors(missing))
    with pytest.raises(TaskError):
        task_from_dict(missing)
