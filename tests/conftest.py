"""Shared fixtures. Tiers: unit (pure logic), integration (real Chromium and/or local Ray), engine, e2e, faults."""

from __future__ import annotations

import pytest

import maigym_ray  # noqa: F401  (loopback Ray settings before anything imports ray)


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
