"""A task file a user wrote by hand, with one typo each, fails at load with a TaskError naming the file, the line
and the field (tests/fixtures/tasks/). A golden that loads but misses its goal is the live check's
(tests/integration/test_validate_tasks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from maigym_ray.errors import TaskError
from maigym_ray.tasks.pool import TaskPool

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def _error(name: str) -> str:
    with pytest.raises(TaskError) as info:
        TaskPool.load(FIXTURES / name)
    return str(info.value)


def test_an_unknown_check_operator_names_file_line_and_field() -> None:
    msg = _error("unknown_operator.jsonl")
    assert "unknown_operator.jsonl line 2" in msg
    assert "field 'verifier'" in msg
    assert "unknown op 'exist'" in msg and "exists" in msg  # says what is valid


def test_a_seed_of_the_wrong_type_names_file_line_and_field() -> None:
    msg = _error("seed_wrong_type.jsonl")
    assert "seed_wrong_type.jsonl line 2" in msg
    assert "field 'initial_state.contacts'" in msg
    assert "must be list, got dict" in msg


def test_a_golden_action_that_does_not_parse_names_file_line_and_field() -> None:
    msg = _error("golden_unparsable.jsonl")
    assert "golden_unparsable.jsonl line 2" in msg
    assert "field 'golden[0]'" in msg
    assert "click(id=contact-c1)" in msg


def test_a_golden_that_misses_its_goal_still_loads_for_the_live_check() -> None:
    pool = TaskPool.load(FIXTURES / "golden_misses_goal.jsonl")
    assert [t.id for t in pool] == ["contacts-add-nina", "contacts-phone-tom-unsaved"]


def test_the_builtin_tasks_pass_the_load_checks() -> None:
    assert len(TaskPool.builtin()) > 0
