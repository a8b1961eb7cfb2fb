"""The docs: the site builds strictly (no broken link, no page outside nav), the benchmarks page is what the
results JSON gives, and the README stays a guide (its sections, its two commands, at most 10 KB)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _report_module():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mkdocs_builds_strictly(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "viewer" / "index.html").is_file()


def test_benchmarks_page_matches_results() -> None:
    report = _report_module()
    assert (ROOT / "docs" / "benchmarks.md").read_text() == report.render(), (
        "docs/benchmarks.md is stale: run python benchmarks/report.py"
    )
    sync = json.loads((ROOT / "benchmarks" / "results" / "weight_sync.json").read_text())
    assert f"| `bucketed_gbps` | {sync['bucketed_gbps']:.4g} |" in report.render()


def test_benchmarks_page_follows_the_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _report_module()
    (tmp_path / "meta.json").write_text(json.dumps({"x.json": {"title": "X", "machine": "m", "date": "d"}}))
    (tmp_path / "x.json").write_text(json.dumps({"a": 1.23456, "b": {"c": [1, 2]}}))
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    page = report.render()
    assert "## X" in page and "| `a` | 1.235 |" in page and "| `b.c` | 1, 2 |" in page
    assert "- command: `not recorded`" in page


def test_readme_is_a_guide() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 10 * 1024
    # .ci/run and new users depend on these two commands, verbatim.
    assert "bash scripts/setup.sh && .venv/bin/python -m maigym_ray.cli.train experiment=debug" in text
    assert "\nbash scripts/test.sh\n" in text
    for heading in (
        "## Install",
        "## Quickstart",
        "## Concepts",
        "## Extend",
        "## Scale out",
        "## Configure",
        "## Tests",
    ):
        assert heading in text, heading
