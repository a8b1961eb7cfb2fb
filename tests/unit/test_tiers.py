"""Every test file names its tier in a module-level ``pytestmark`` (``scripts/test.sh -m unit`` and the other
tiers select by marker: a file without one is skipped by every tier but the full run)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]
TIERS = {"unit", "integration", "engine", "e2e", "faults", "multinode", "bench"}


def tiers_of(path: Path) -> set[str]:
    """The tier markers of the module-level ``pytestmark`` of ``path`` (a mark or a list of marks)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            return {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)} & TIERS
    return set()


def test_every_test_file_carries_a_tier_marker():
    files = sorted(TESTS.rglob("test_*.py"))
    assert len(files) > 50
    missing = [str(p.relative_to(TESTS)) for p in files if not tiers_of(p)]
    assert not missing, f"no tier marker (pytestmark = pytest.mark.<tier>) in: {missing}"


def test_the_check_sees_a_file_without_one(tmp_path):
    (tmp_path / "test_x.py").write_text("import pytest\n\ndef test_a():\n    pass\n")
    (tmp_path / "test_y.py").write_text(
        "import pytest\npytestmark = [pytest.mark.engine, pytest.mark.numeric]\n"
    )
    assert tiers_of(tmp_path / "test_x.py") == set() and tiers_of(tmp_path / "test_y.py") == {"engine"}
