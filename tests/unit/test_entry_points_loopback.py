"""Every script entry point imports maigym_ray before ray, so a local Ray listens on loopback only.

maigym_ray/__init__.py sets RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (and friends) when it is imported; Ray reads
them once, when it is first imported. isort puts third-party ``import ray`` above first-party imports, which is
how three benchmarks came to listen on every interface: this test walks the files' imports in source order.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("launch/*.py"), *ROOT.glob("scripts/*.py")])


def _module(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name.split(".")[0] for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module.split(".")[0]]
    return []


def ray_before_maigym(source: str) -> int | None:
    """The line of an ``import ray``/``from ray...`` not preceded, in its own scope or an enclosing one, by a
    maigym_ray import; None if there is none. (An import in another function does not count: it may not run
    first.)"""

    def visit(body: list[ast.stmt], seen: bool) -> tuple[int | None, bool]:
        for stmt in body:
            mods = _module(stmt)
            if "maigym_ray" in mods:
                seen = True
            if "ray" in mods and not seen:
                return stmt.lineno, seen
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner:
                    if field == "handlers":
                        inner = [s for h in inner for s in h.body]
                    nested_scope = isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                    line, inner_seen = visit(inner, seen)
                    if line is not None:
                        return line, seen
                    if not nested_scope:
                        seen = inner_seen  # an import in an if/try block at this scope runs here
        return None, seen

    return visit(ast.parse(source).body, False)[0]


def test_the_scripts_exist() -> None:
    assert any(p.parent.name == "benchmarks" for p in SCRIPTS) and any(
        p.parent.name == "launch" for p in SCRIPTS
    )


@pytest.mark.parametrize("path", SCRIPTS, ids=[str(p.relative_to(ROOT)) for p in SCRIPTS])
def test_maigym_ray_is_imported_before_ray(path: Path) -> None:
    line = ray_before_maigym(path.read_text())
    assert line is None, (
        f"{path.relative_to(ROOT)}:{line} imports ray before maigym_ray (Ray would not be on loopback)"
    )


def test_the_check_catches_the_isort_order() -> None:
    bad = "import json\n\nimport ray\n\nimport maigym_ray\n"
    nested = "def f():\n    from ray.job_submission import X\n\nimport maigym_ray\n"
    other_fn = "def g():\n    import maigym_ray\n\ndef f():\n    import ray\n"
    good = "import maigym_ray  # noqa\n\n# isort: split\n\nimport ray\n"
    assert ray_before_maigym(bad) == 3 and ray_before_maigym(nested) == 2 and ray_before_maigym(other_fn) == 5
    assert ray_before_maigym(good) is None and ray_before_maigym("import json\n") is None
