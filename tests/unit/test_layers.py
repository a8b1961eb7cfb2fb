"""The package's layering, read from the source, as an allow-list over every top-level module and package:
each may import only what its entry in :data:`ALLOWED` names. Every kind of dependency counts:

- imports at module level, inside functions (a lazy import is still a dependency) and under TYPE_CHECKING;
- string imports: a ``"maigym_ray.x.y"`` or ``"maigym_ray.x.y:attr"`` string anywhere in the code (registry
  tables, ``importlib.import_module`` calls, f-strings with such a prefix).

A new top-level module or package has no entry and fails until it gets one. Plug-ins of every kind reach the
registries through entry points declared in pyproject.toml (maigym_ray/plugins.py), so no layer names the
modules that implement them."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2] / "maigym_ray"

#: The foundation: what every layer may import (errors, the plug-in mechanism, plain types, the action grammar
#: and small helpers). Each of these imports only the ones before it in its own entry below.
FOUNDATION = {"errors", "plugins", "types", "durable", "rates", "generation", "actions"}
_ENV_SIDE = FOUNDATION | {"apps", "tasks"}
_ROLLOUT = _ENV_SIDE | {"envs", "harness", "policy", "weights", "config"}
_RL = _ROLLOUT | {"rollout"}
_RUNTIME = _RL | {"rl", "synth"}

#: For each top-level module or package (or, where one module of a package sits higher or lower than the rest,
#: that module), the maigym_ray top-level modules it may import, or single modules of one (``harness.config``).
#: A package's modules may import each other, except a module with a rule of its own: it may import its own
#: package's modules only as its rule names them. runtime -> rl -> rollout -> (harness, envs, policy)
#: -> (tasks, apps) -> foundation; envs never import the harness, policy never imports rl; suites are plug-ins
#: of the env and task layers, imported by nothing (their kinds come by entry point); the fakes of testing/ are
#: imported by no production module; cli is the top.
ALLOWED: dict[str, set[str]] = {
    "__init__": set(),
    "errors": set(),
    "plugins": {"errors"},
    "types": {"errors"},
    "durable": {"errors"},
    "rates": {"errors"},
    "generation": {"errors", "types"},
    "actions": {"errors", "types"},
    "apps": FOUNDATION,
    "tasks": FOUNDATION | {"apps"},
    "synth": _ENV_SIDE,
    "weights": FOUNDATION,
    "envs": _ENV_SIDE,
    "harness": _ENV_SIDE,
    "policy": FOUNDATION | {"weights"},
    # the harness's and the engine's settings: plain dataclasses the run's config composes, so they import
    # only the foundation, not even the rest of their own package
    "harness.config": FOUNDATION,
    "policy.config": FOUNDATION,
    "viewer": _ENV_SIDE | {"harness"},
    # the run's config composes the envs' schemas and the harness's and the policy's settings modules, never
    # their logic
    "config": _ENV_SIDE | {"envs", "harness.config", "policy.config"},
    "suites": _ENV_SIDE | {"envs"},
    # the Gymnasium adapter brings an EnvManager up on its own Ray: a front end, like a CLI
    "suites.gym_env": _RUNTIME | {"runtime", "suites"},
    "rollout": _ROLLOUT,
    "rl": _RL,
    "runtime": _RUNTIME | {"viewer"},
    "testing": _RUNTIME | {"runtime"},
    "cli": _RUNTIME | {"runtime", "viewer", "suites"},
}

#: A string that names a module of the package, optionally with ``:attr`` (the whole string, not prose).
_MODULE_STRING = re.compile(r"maigym_ray(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_][\w.]*)?")


def _string_target(node: ast.AST) -> str | None:
    """The module a string constant (or an f-string's constant prefix) names, if it names one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        text = str(node.values[0].value).rstrip(".")
    else:
        return None
    if not _MODULE_STRING.fullmatch(text):
        return None
    return text.partition(":")[0]


def _imports(path: Path, names: bool = False, strings: bool = True) -> set[str]:
    """The dotted maigym_ray modules ``path`` imports (``from maigym_ray import x`` counts as maigym_ray.x),
    lazily or not, plus (``strings``) every module a string names; with ``names``, also ``m.x`` for every
    ``from m import x`` (x may be a submodule)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("maigym_ray.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "maigym_ray":
                found |= {f"maigym_ray.{a.name}" for a in node.names}
            elif node.module.startswith("maigym_ray."):
                found.add(node.module)
                if names:  # each name may be a submodule (from pkg import mod)
                    found |= {f"{node.module}.{a.name}" for a in node.names}
        elif strings:
            target = _string_target(node)
            if target is not None:
                found.add(target)
    return found


def _top_levels(root: Path = ROOT) -> set[str]:
    """Every top-level module and package of the package (``__init__`` is the package itself)."""
    return {p.stem for p in root.glob("*.py")} | {
        p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }


def _rule(path: Path, root: Path = ROOT) -> str:
    """The ALLOWED entry that governs ``path``: its own module's, else its top-level module's."""
    rel = path.relative_to(root).with_suffix("")
    dotted = ".".join(rel.parts)
    return dotted if dotted in ALLOWED else rel.parts[0]


def _permitted(mod: str, rule: str, names: set[str]) -> bool:
    """Whether a module governed by ``rule`` may import ``mod`` (dotted, under maigym_ray), given its rule's
    ``names``: a top-level module names all of it, a dotted name (``harness.config``) that module only."""
    parts = mod.split(".")[1:]
    if "." not in rule and parts[0] == rule:
        return True  # a package's modules import each other
    if ".".join(parts) == rule:
        return True  # a module with its own rule naming itself
    return any(".".join(parts[:i]) in names for i in range(1, len(parts) + 1))


def _violations(root: Path = ROOT, allowed: dict[str, set[str]] = ALLOWED) -> list[str]:
    tops = _top_levels(root)
    out = [f"maigym_ray/{t} has no entry in ALLOWED" for t in sorted(tops - set(allowed))]
    for path in sorted(root.rglob("*.py")):
        rule = _rule(path, root)
        for mod in sorted(_imports(path)):
            if (
                mod.split(".")[1] not in tops
            ):  # a name of the package itself (LOOPBACK_ENV), an entry-point group
                continue
            if not _permitted(mod, rule, allowed.get(rule, set())):
                out.append(f"{path.relative_to(root.parent)} ({rule}) imports {mod}")
    return out


def test_every_top_level_module_has_a_rule_and_keeps_to_it() -> None:
    top_rules = {name for name in ALLOWED if "." not in name}
    assert top_rules == _top_levels(), "ALLOWED lists every top-level module, and no other undotted name"
    assert _violations() == []


def test_no_cli_imports_another_cli() -> None:
    for path in sorted((ROOT / "cli").glob("*.py")):
        others = {m for m in _imports(path) if m.startswith("maigym_ray.cli.")} - {
            f"maigym_ray.cli.{path.stem}"
        }
        assert not others, f"{path.name} imports {sorted(others)}"


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    """A synthetic maigym_ray tree with the real top-level names (so rules apply) plus ``files``."""
    root = tmp_path / "maigym_ray"
    for top in _top_levels():
        if (ROOT / f"{top}.py").exists():
            (root / f"{top}.py").parent.mkdir(parents=True, exist_ok=True)
            (root / f"{top}.py").write_text("")
        else:
            (root / top).mkdir(parents=True, exist_ok=True)
            (root / top / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


def test_the_checker_sees_upward_imports_static_lazy_and_by_string(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "envs/lazy.py": "def f():\n    from maigym_ray.harness import episode\n",
            # a registry table naming a suite's builder: the upward string import the plug-in mechanism removed
            "envs/table.py": 'BUILDERS = {"miniwob": "maigym_ray.suites.miniwob:build_backend"}\n',
            "tasks/dyn.py": (
                "import importlib\n\n"
                "def load(name):\n"
                '    return importlib.import_module(f"maigym_ray.rl.{name}")\n'
            ),
            "policy/fine.py": '"""Prose that mentions maigym_ray.rl is not an import."""\nGROUP = "maigym_ray.backends"\n',
            "harness/ok.py": "from maigym_ray.actions import parse\nfrom maigym_ray import LOOPBACK_ENV\n",
        },
    )
    assert _violations(root) == [
        "maigym_ray/envs/lazy.py (envs) imports maigym_ray.harness",
        "maigym_ray/envs/table.py (envs) imports maigym_ray.suites.miniwob",
        "maigym_ray/tasks/dyn.py (tasks) imports maigym_ray.rl",
    ]


def test_the_config_composes_settings_modules_and_no_logic(tmp_path: Path) -> None:
    # the run's config may import the harness's settings module, not the harness; and that settings module may
    # not reach back into its own package's logic, lazily either
    root = _plant(
        tmp_path,
        {
            "config.py": (
                "from maigym_ray.harness.config import PromptConfig\n"
                "from maigym_ray.policy.config import EngineConfig\n"
                "from maigym_ray.harness.prompt import PromptBuilder\n"
            ),
            "harness/config.py": "def f():\n    from maigym_ray.harness.history import window_of\n",
            "harness/history.py": "from maigym_ray.harness.config import HistoryConfig\n",
        },
    )
    assert _violations(root) == [
        "maigym_ray/config.py (config) imports maigym_ray.harness.prompt",
        "maigym_ray/harness/config.py (harness.config) imports maigym_ray.harness.history",
    ]


def test_the_checker_sees_a_top_level_module_without_a_rule(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"newthing.py": ""})
    assert _violations(root) == ["maigym_ray/newthing has no entry in ALLOWED"]


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
        if _rule(p).split(".")[0] != "testing"
        for m in sorted(_imports(p))
        if m.split(".")[:2] == ["maigym_ray", "testing"]
    ]
    assert found == []


def test_composing_the_run_config_loads_no_harness_or_policy_logic() -> None:
    # what the layer rule above says statically, at run time: an env actor or a suite that builds configs does
    # not load the prompt builder, the history, the engine (and with it vLLM or torch)
    probe = (
        "import sys, maigym_ray.config\n"
        "print(sorted(m for m in sys.modules if m.startswith(('maigym_ray.harness.', 'maigym_ray.policy.'))"
        " or m in ('torch', 'vllm')))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT.parent)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "['maigym_ray.harness.config', 'maigym_ray.policy.config']"
