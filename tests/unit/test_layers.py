"""The package's layering, read from the source: runtime -> rl -> rollout -> (harness, envs, policy) -> (tasks,
apps) -> (actions, generation, types, errors). A module imports only layers to its right; envs never import the
harness, policy never imports rl; no CLI imports another CLI. Imports inside functions count too: a lazy
import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2] / "maigym_ray"

#: For each package (or top-level module), the maigym_ray packages it must never import. The top-level
#: ``config`` composes the harness's, the policy's and the envs' configs, so importing it from those layers (or
#: below them) is an upward dependency: the envs' own schema lives in ``envs/config.py``.
FORBIDDEN = {
    "rl": {"runtime", "cli"},
    "rollout": {"rl", "runtime", "cli"},
    "harness": {"envs", "policy", "rollout", "rl", "runtime", "cli", "config"},
    "envs": {"harness", "policy", "rollout", "rl", "runtime", "cli", "config"},
    "policy": {"harness", "envs", "rollout", "rl", "runtime", "cli", "config"},
    "tasks": {"harness", "envs", "policy", "rollout", "rl", "runtime", "cli", "config"},
    "apps": {"tasks", "harness", "envs", "policy", "rollout", "rl", "runtime", "cli", "config"},
    "actions": {"tasks", "apps", "harness", "envs", "policy", "rollout", "rl", "runtime", "cli", "config"},
    "generation": {"tasks", "apps", "harness", "envs", "policy", "rollout", "rl", "runtime", "cli", "config"},
    "types": {"tasks", "apps", "harness", "envs", "policy", "rollout", "rl", "runtime", "cli", "config"},
}


def _imports(path: Path) -> set[str]:
    """The dotted maigym_ray modules ``path`` imports (``from maigym_ray import x`` counts as maigym_ray.x)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("maigym_ray.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "maigym_ray":
                found |= {f"maigym_ray.{a.name}" for a in node.names}
            elif node.module.startswith("maigym_ray."):
                found.add(node.module)
    return found


def _layer(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _violations(layer: str, root: Path = ROOT) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        if _layer(path, root) != layer:
            continue
        for mod in sorted(_imports(path)):
            if mod.split(".")[1] in FORBIDDEN[layer]:
                out.append(f"{path.relative_to(root.parent)} imports {mod}")
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_only_layers_to_its_right(layer: str) -> None:
    assert any(_layer(p) == layer for p in ROOT.rglob("*.py")), f"no module in layer {layer}"
    assert _violations(layer) == []


def test_no_cli_imports_another_cli() -> None:
    for path in sorted((ROOT / "cli").glob("*.py")):
        others = {m for m in _imports(path) if m.startswith("maigym_ray.cli.")} - {
            f"maigym_ray.cli.{path.stem}"
        }
        assert not others, f"{path.name} imports {sorted(others)}"


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    # the checker itself must be able to fail: an envs module importing the harness is caught, even lazily
    pkg = tmp_path / "maigym_ray" / "envs"
    pkg.mkdir(parents=True)
    (pkg / "bad.py").write_text("def f():\n    from maigym_ray.harness import episode\n")
    assert _violations("envs", tmp_path / "maigym_ray") == [
        "maigym_ray/envs/bad.py imports maigym_ray.harness"
    ]
