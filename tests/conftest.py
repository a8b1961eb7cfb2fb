"""Shared fixtures. Tiers: unit (pure logic), integration (real Chromium and/or local Ray), engine, e2e, faults."""

from __future__ import annotations

import pytest

import maigym_ray  # noqa: F401  (loopback Ray settings before anything imports ray)

# The files that train a model or serve one while another trains: two of them at once on 2 cores would each run at
# half speed and double the memory peak, so under pytest-xdist they share one scope, and so one worker, in turn.
HEAVY_FILES = frozenset(
    {
        "tests/e2e/test_train.py",
        "tests/e2e/test_learning.py",
        "tests/e2e/test_driver_guard.py",
        "tests/engine/test_smollm2.py",
    }
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Whole files to a worker (their module fixtures start Chromium, Ray actors or an engine once), the heavy
    files all to one, and each benchmark smoke test on its own. xdist's own `xdist_group` mark cannot do this
    under pytest 9: xdist rewrites the item's `_nodeid`, which pytest 9 no longer reads (docs/decisions.md)."""
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path.startswith("tests/bench/"):  # each benchmark is a subprocess of its own: one test a scope
                return nodeid
            return "heavy" if path in HEAVY_FILES else path

    return FileScheduling(config, log)


@pytest.fixture(scope="session")
def load_file():
    """Imports a script of the repository that is not a package module (a benchmark, a launcher) by its path
    relative to the repository root, e.g. ``load_file("benchmarks/soak.py")``; each file is loaded once."""
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    loaded: dict[str, object] = {}

    def load(rel: str):
        if rel not in loaded:
            name = "script_" + rel.replace("/", "_").removesuffix(".py")
            spec = importlib.util.spec_from_file_location(name, root / rel)
            mod = importlib.util.module_from_spec(spec)
            # as Python runs a script: its own directory first on the path, so it imports its sibling modules
            # (benchmarks/train_job.py)
            sys.path.insert(0, str((root / rel).parent))
            try:
                spec.loader.exec_module(mod)
            finally:
                sys.path.remove(str((root / rel).parent))
            loaded[rel] = mod
        return loaded[rel]

    return load


@pytest.fixture(scope="session")
def ray_local():
    """One loopback-only local Ray for the whole test session."""
    import ray

    from maigym_ray.config import RayConfig
    from maigym_ray.runtime.ray_init import init_ray

    init_ray(RayConfig(num_cpus=2, object_store_mb=256))
    yield ray
    ray.shutdown()


@pytest.fixture
def fake_env(ray_local, tmp_path):
    """A fresh EnvManager over fake pools (web and mobile_web) and its faults folder; torn down after."""
    from maigym_ray.envs.manager import EnvManager
    from maigym_ray.testing.drills import fake_manager_config

    faults = tmp_path / "faults"
    faults.mkdir()
    managers = []

    def make(**kw):
        cfg = fake_manager_config(str(faults), **kw)
        m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg)
        ray_local.get(m.start.remote(wait=True), timeout=120)
        managers.append(m)
        return m

    yield make, faults
    for m in managers:
        try:
            ray_local.get(m.shutdown.remote(), timeout=60)
        finally:
            ray_local.kill(m)
