"""Starting or joining Ray. A local (single-node) Ray listens on 127.0.0.1 only.

Ray 2.60 binds every interface by default. ``maigym_ray/__init__.py`` sets ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
before ray is imported (ray reads it at import), and with the node address 127.0.0.1 every listener of a local
cluster stays on loopback (tests/integration/test_loopback.py checks the listening sockets). Workers inherit the
same variables through the runtime env. Token auth stays at Ray's default (on).

``ray.address=""`` always means a new local Ray of this process's own (``ray.init(address="local")``). A bare
``ray.init()`` would join whatever ``/tmp/ray/ray_current_cluster`` names: any head started on this machine by
``ray start`` or ``ray.cluster_utils`` writes it, and a process killed before its shutdown leaves it behind,
pointing at a dead or foreign cluster; the run then failed with Ray's "When connecting to an existing cluster,
num_cpus and num_gpus must not be provided" (it broke a CI run while another Ray ran on the machine).
"""

from __future__ import annotations

import os
from typing import Any

from maigym_ray import LOOPBACK_ENV
from maigym_ray.config import RayConfig
from maigym_ray.errors import ConfigError


def init_ray(cfg: RayConfig | None = None, **extra: Any) -> dict[str, Any]:
    """Connects to ``cfg.address`` or starts a loopback-only local Ray. Returns ``ray.init``'s context info."""
    import ray

    cfg = cfg or RayConfig()
    if ray.is_initialized():
        return {}
    if cfg.address:
        ctx = ray.init(address=cfg.address, **extra)
    else:
        if os.environ.get("RAY_ADDRESS"):
            # Inside `ray job submit` (or a shell pointed at a cluster) a private local Ray would run the job
            # beside the cluster, not on it, and without the loopback settings maigym_ray/__init__.py skips there.
            raise ConfigError(
                f"RAY_ADDRESS is set ({os.environ['RAY_ADDRESS']}) but ray.address is empty: pass ray.address=auto "
                "to run on that cluster, or unset RAY_ADDRESS for a local run"
            )
        ctx = ray.init(
            address="local",
            _node_ip_address="127.0.0.1",
            include_dashboard=False,
            num_cpus=cfg.num_cpus or os.cpu_count(),
            object_store_memory=cfg.object_store_mb * 1024 * 1024,
            runtime_env={"env_vars": {k: os.environ.get(k, v) for k, v in LOOPBACK_ENV.items()}},
            log_to_driver=True,
            **extra,
        )
    return {"address": getattr(ctx, "address_info", {}).get("address", "")}
