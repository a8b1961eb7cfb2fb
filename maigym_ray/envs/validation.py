"""Checks an EnvManagerConfig against what is registered (backend kinds, app names) and its own sizes.

It lives apart from the schema (envs/config.py) because it reads the registries, and the registries build
backends whose modules import the schema: the schema itself imports nothing of the package but its errors.
"""

from __future__ import annotations

from maigym_ray.envs.config import EnvManagerConfig, check_choice
from maigym_ray.envs.registry import check_pool
from maigym_ray.errors import ConfigError
from maigym_ray.types import PLATFORMS


def validate_manager_config(cfg: EnvManagerConfig) -> None:
    """Checks names and sizes in an EnvManagerConfig, raising :class:`ConfigError` with the valid choices."""
    if cfg.apps != ["all"]:
        from maigym_ray.apps.registry import check_app_names  # every app module: only when names are given

        check_app_names(cfg.apps)  # registers user apps given as "module:Class"
    if not cfg.pools:
        raise ConfigError("env.pools is empty: configure at least one pool")
    for name, pool in cfg.pools.items():
        if pool.instances_per_actor < 1:
            raise ConfigError(
                f"env.pools.{name}.instances_per_actor must be >= 1, got {pool.instances_per_actor}"
            )
        check_choice(f"env.pools.{name}.platform", pool.platform, PLATFORMS)
        check_pool(pool, f"env.pools.{name}")  # the settings the pool's backend kind reads
        if not 0 <= pool.target_size <= pool.max_size or pool.max_size < 1:
            raise ConfigError(f"env.pools.{name}: need 0 <= target_size <= max_size and max_size >= 1")
    if cfg.health_batch < 0:
        raise ConfigError(f"env.health_batch={cfg.health_batch}: need >= 0 (0 checks every idle instance)")
