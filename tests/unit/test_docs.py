"""The docs: the site builds strictly (no broken link, no page outside nav), the benchmarks page is what the
results JSON gives, and the README stays a guide (its sections, its two commands, at most 10 KB)."""

from __future__ import annotations

import importlib.util
import json
import re
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
    assert "bash scripts/setup.sh && .venv/bin/python -m maigym_ray.cli.train experiment=smol" in text
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


def _readme_commands() -> list[str]:
    """The commands of the README's Install and Quickstart code blocks (continuation lines joined)."""
    text = (ROOT / "README.md").read_text()
    body = text[text.index("## Install") : text.index("## Concepts")]
    blocks = re.findall(r"```bash\n(.*?)```", body, re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [" ".join(line.split()) for line in lines if line.strip() and not line.startswith("#")]


def test_every_readme_quickstart_command_names_a_test_that_exists() -> None:
    commands = _readme_commands()
    assert len(commands) >= 6 and any("cli.view" in c for c in commands)
    table = {}
    testing = (ROOT / "docs" / "testing.md").read_text()
    for row in re.findall(r"^\| `([^`]+)` \| (.+) \|$", testing, re.M):
        table[row[0]] = row[1]
    for cmd in commands:
        assert cmd in table, f"docs/testing.md names no test for the README command: {cmd}"
        for path, name in re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", table[cmd]):
            assert re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.M), f"{path}::{name}"
        assert "tests/" in table[cmd] or ".ci/run" in table[cmd]


def test_nothing_points_outside_the_repository() -> None:
    """Code, configs and docs cite files in the repository only (the design notes of the sessions that built it
    are not shipped)."""
    outside = re.compile("DESIGN" + r"\.md|\.\./" + "shared")
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for top in ("README.md", "docs", "maigym_ray", "conf", "launch", "tests", "benchmarks", "scripts")
        for p in ([ROOT / top] if (ROOT / top).is_file() else (ROOT / top).rglob("*"))
        if p.is_file() and p.suffix in (".md", ".py", ".yaml", ".yml", ".sh", ".js", ".html")
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if outside.search(line)
    ]
    assert not found, found
