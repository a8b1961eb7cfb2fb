"""``python -m maigym_ray.cli.validate_tasks``: a file of one good and one bad hand-written task, checked on real
Chromium instances behind the EnvManager on the session's local Ray; a file that does not load is exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from maigym_ray.cli.validate_tasks import main

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def test_one_good_one_bad_task_gives_per_task_verdicts_and_exit_1(ray_local, capsys) -> None:
    status = main([str(FIXTURES / "golden_misses_goal.jsonl"), "--concurrency", "1"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "PASS  contacts-add-nina" in out
    assert "FAIL  contacts-phone-tom-unsaved" in out and "golden_misses_goal" in out
    assert "1 passed, 1 failed, 0 not checked" in out


def test_a_file_that_does_not_load_is_exit_2_with_the_line(capsys) -> None:
    status = main([str(FIXTURES / "golden_unparsable.jsonl")])
    out = capsys.readouterr().out
    assert status == 2
    assert "golden_unparsable.jsonl line 2" in out and "golden[0]" in out
