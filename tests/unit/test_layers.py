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


def _imports(path: Path, names: bool = False) -> set[str]:
    """The dotted maigym_ray modules ``path`` imports (``from maigym_ray import x`` counts as maigym_ray.x);
    with ``names``, also ``m.x`` for every ``from m import x`` (x may be a submodule)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("maigym_ray.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "maigym_ray":
                found |= {f"maigym_ray.{a.name}" for a in node.names}
            elif node.module.startswith("maigym_ray."):
                found.add(node.module)
                if names:  # each name may be a submodule (from pkg import mod)
                    found |= {f"{node.module}.{a.name}" for a in node.names}
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


def _module(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a name resolves to its longest existing module prefix)."""
    paths = {_module(p, root): p for p in root.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in paths.items():
        found = {resolve(name) for name in _imports(path, names=True)}
        graph[mod] = {m for m in found if m and m != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    scc.append(m)
                    if m == node:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return out


def test_no_two_modules_import_each_other_even_lazily() -> None:
    # a cycle, even through a function-level import, means neither module can be understood (or moved) alone
    assert _cycles(_import_graph()) == []


def test_the_cycle_checker_sees_a_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    pkg = tmp_path / "maigym_ray" / "envs"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from maigym_ray.envs.b import x\n")
    (pkg / "b.py").write_text("def x():\n    from maigym_ray.envs import a\n")
    (pkg / "c.py").write_text("from maigym_ray.envs.a import y\n")
    assert _cycles(_import_graph(tmp_path / "maigym_ray")) == [["maigym_ray.envs.a", "maigym_ray.envs.b"]]


def test_production_code_never_imports_the_fakes() -> None:
    # the fakes (maigym_ray/testing/) reach the registries the way a user's plug-in does (the fake backend
    # through this package's entry point), so nothing outside testing/ depends on them
    found = [
        f"{p.relative_to(ROOT.parent)} imports {m}"
        for p in sorted(ROOT.rglob("*.py"))
        if _layer(p) != "testing"
        for m in sorted(_imports(p))
        if m.split(".")[:2] == ["maigym_ray", "testing"]
    ]
    assert found == []
