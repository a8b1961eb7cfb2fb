"""Shared fixtures. Tiers: unit (pure logic), integration (real Chromium and/or local Ray), engine, e2e."""

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
