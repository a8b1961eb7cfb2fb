"""Rates over scored episodes say "no data" when nothing was scored (maigym_ray/rates.py and its users)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maigym_ray.rates import fmt_rate, rate
from maigym_ray.rl.report import write_report
from maigym_ray.runtime.evaluation import split_success, split_table, success_table, task_error_lines

pytestmark = pytest.mark.unit


def _row(success: bool, infra: bool, app: str = "notes", split: str = "test") -> dict[str, object]:
    return {"app": app, "platform": "web", "split": split, "success": success, "infra_failed": infra}


def test_rate_is_none_without_scored_episodes() -> None:
    assert rate(0, 0) is None and rate(1, 4) == 0.25 and rate(0, 3) == 0.0
    assert fmt_rate(None) == "n/a" and fmt_rate(0.5) == "0.50" and fmt_rate(0.0, ".3f") == "0.000"


def test_eval_tables_say_n_a_when_every_episode_infra_failed() -> None:
    rows = [_row(False, True), _row(False, True), _row(True, False, app="mail", split="train")]
    table = success_table(rows)
    notes = next(ln for ln in table.splitlines() if ln.startswith("notes"))
    assert "n/a" in notes and "0.00" not in notes  # 2 infra failures, nothing scored: no data, not 0 %
    assert "1.00" in next(ln for ln in table.splitlines() if ln.startswith("mail"))
    by_split = split_success(rows)
    assert by_split["test"] == {"success_rate": None, "episodes": 0}
    assert by_split["train"]["success_rate"] == 1.0
    assert json.loads(json.dumps(by_split))["test"]["success_rate"] is None  # null in report.json
    assert "n/a" in next(ln for ln in split_table(rows).splitlines() if ln.startswith("test"))
    assert "n/a" in success_table([_row(False, True)]).splitlines()[-1]  # the "all" line too


def test_success_table_columns_count_what_they_say() -> None:
    """A task error is counted under task_errors, not under infra_failed, and its reason is printed."""
    rows = [
        {**_row(True, False), "outcome": "success", "task_id": "a"},
        {**_row(False, False), "outcome": "failure", "task_id": "b"},
        {
            **_row(False, True),
            "outcome": "task_error",
            "task_id": "c",
            "error": "TaskError: unknown op 'exist'",
        },
        {**_row(False, True), "outcome": "infra_failed", "task_id": "d", "error": "BackendError: gone"},
        {**_row(False, True), "outcome": "infra_failed", "task_id": "e", "error": "BackendError: gone"},
    ]
    head, notes, total = success_table(rows).splitlines()
    assert head.split() == ["app", "platform", "success_rate", "scored", "task_errors", "infra_failed"]
    assert notes.split() == ["notes", "web", "0.50", "2", "1", "2"]
    assert total.split() == ["all", "0.50", "2", "1", "2"]
    assert task_error_lines(rows) == ["task error: c on web: TaskError: unknown op 'exist'"]


def test_training_report_keeps_missing_heldout_as_null(tmp_path: Path) -> None:
    report = {
        "heldout_success_before": None,
        "heldout_success_sft": 0.5,
        "heldout_success_rl": None,
        "history": [{"round": 0, "success": None, "reward": None, "loss": 0.1}],
    }
    write_report(tmp_path, report)
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["heldout_success_before"] is None and saved["history"][0]["success"] is None
    assert (tmp_path / "heldout.png").stat().st_size > 0
