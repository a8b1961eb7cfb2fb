"""The reference pages under docs/reference/ are what scripts/reference_pages.py makes from the code today: a
change to the grammar, the verifiers, the App API or the task schema without regenerating them fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from maigym_ray import actions
from maigym_ray.actions import ArgSpec

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen(load_file):
    return load_file("scripts/reference_pages.py")


def test_committed_pages_match_the_code(gen) -> None:
    for name, text in gen.render().items():
        path = ROOT / "docs" / "reference" / name
        assert path.exists() and path.read_text() == text, (
            f"{path} is stale: run python scripts/reference_pages.py"
        )
    assert gen.main(["--check"]) == 0


def test_a_change_in_the_code_shows_as_a_stale_page(gen, monkeypatch) -> None:
    monkeypatch.setitem(actions.ACTIONS, "shake", {"times": ArgSpec("int", True)})
    assert "| `shake` | `times*`: int |" in gen.actions_page()
    assert gen.main(["--check"]) == 1


def test_the_pages_are_in_the_site_nav(gen) -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(f"reference/{name}" in nav for name in gen.PAGES)


def test_the_pages_name_what_a_plugin_author_needs(gen) -> None:
    pages = gen.render()
    assert "`exists`" in pages["verifiers.md"] and "$contains" in pages["verifiers.md"]
    assert (
        "`form`" in pages["app-api.md"]
        and "self.data" in pages["app-api.md"]
        and "/<app>/" in pages["app-api.md"]
    )
    assert "| `contacts` | `contacts`: list |" in pages["app-api.md"]  # seed types
    assert "`golden`" in pages["task-schema.md"] and "`click`" in pages["actions.md"]
