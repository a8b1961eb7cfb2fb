"""Placement: every ``ray.remote(...).options(...)`` of a run and its placement groups, built from the topology.

No other module decides what an actor asks Ray for (CPUs, GPUs, memory, custom resources): they take the
options built here. A role that names a custom resource (``web_host``, ``trainer_host``...) lands only on nodes
that advertise it; a role with GPUs gets them from Ray, which sets ``CUDA_VISIBLE_DEVICES`` in its process
(Ray 2.60 leaves an actor with ``num_gpus=0`` seeing every GPU of its node, so GPU roles must ask;
docs/platform-notes.md).

Engines with tensor parallelism > 1 and multi-rank GPU trainers get a placement group each: their GPUs are
reserved together (STRICT_PACK: one node) before the actor starts, and the actor's child workers (vLLM's TP
workers, if it uses the Ray executor) are captured into the same group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.runtime.topology import EnvHostConfig, TopologyConfig, engine_count

#: requests an env actor serves at once (observe while a step is in flight, health checks).
ENV_ACTOR_CONCURRENCY = 8
#: the control-plane actors (manager, node services) serve every rollout at once.
CONTROL_CONCURRENCY = 1000
#: the driver's concurrent calls (run, plus progress queries).
DRIVER_CONCURRENCY = 8
#: the amount of the driver's node resource that pins a control-plane actor or task to that node.
_SLIVER = 0.0001


def _resources(name: str, amount: float) -> dict[str, Any]:
    return {"resources": {name: amount}} if name and amount > 0 else {}


@dataclass
class Placement:
    """The Ray options of every role of one run; see the module docstring."""

    topology: TopologyConfig
    #: policy.num_engines (used when topology.engines.count is 0).
    num_engines: int = 1
    #: environment variables every role's process gets on top of its own (e.g. loopback settings).
    env_vars: dict[str, str] = field(default_factory=dict)

    # -- control plane -------------------------------------------------------------------------------------
    def driver(self) -> dict[str, Any]:
        """The driver actor: orchestrates, holds no model."""
        d = self.topology.driver
        return {
            "num_cpus": d.num_cpus,
            "max_concurrency": DRIVER_CONCURRENCY,
            **_resources(d.resource, _SLIVER),
            **self._runtime_env({}),
        }

    def env_manager(self) -> dict[str, Any]:
        """The EnvManager actor (an async control plane; it waits, it does not compute). It sits with the
        driver: losing an env host node must not take the control plane with it."""
        return {
            "num_cpus": 0,
            "max_concurrency": CONTROL_CONCURRENCY,
            **self._with_driver(),
            **self._runtime_env({}),
        }

    def node_services(self, node_id: str) -> dict[str, Any]:
        """The shared services (app servers, a shared Chromium) of the node ``node_id``. Every node that hosts
        env actors gets its own set, pinned there: its env actors reach their apps and browser on the node
        itself (loopback), and losing a node takes only that node's services. The EnvManager calls this with
        the node its env actor landed on (the env actor is placed by its host resource, the services follow)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return {
            "num_cpus": 0,
            "max_concurrency": CONTROL_CONCURRENCY,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
            **self._runtime_env({}),
        }

    def rollout_task(self) -> dict[str, Any]:
        """The rollout Ray task: it waits on the env and the engines, so it reserves no CPU; it runs with the
        driver, so that a lost env host fails its episode (retried) and not the task. Ray's own retry is off:
        the caller retries an infrastructure failure on a fresh lease and records each attempt."""
        return {"num_cpus": 0, "max_retries": 0, **self._with_driver()}

    def _with_driver(self) -> dict[str, Any]:
        # A sliver of the driver's resource: it pins to the driver's node without using up the resource.
        return _resources(self.topology.driver.resource, _SLIVER)

    # -- envs ----------------------------------------------------------------------------------------------
    def env_host(self, platform: str) -> EnvHostConfig:
        """The host kind of ``platform`` (an unplaced default when the topology declares none)."""
        return self.topology.env_hosts.get(platform, EnvHostConfig())

    def env_actor(self, pool: PoolConfig) -> dict[str, Any]:
        """One env actor of ``pool``: its CPUs, memory and host resource, and the pool's env vars."""
        host = self.env_host(pool.platform)
        opts: dict[str, Any] = {
            "num_cpus": pool.num_cpus if host.num_cpus < 0 else host.num_cpus,
            "max_concurrency": ENV_ACTOR_CONCURRENCY,
            **_resources(host.resource, host.resource_per_env),
            **self._runtime_env(dict(pool.env_vars)),
        }
        if host.memory_mb:
            opts["memory"] = host.memory_mb * 1024 * 1024
        return opts

    def env_actors(self, cfg: EnvManagerConfig) -> dict[str, dict[str, Any]]:
        """:meth:`env_actor` for every pool of ``cfg``, keyed by pool name (what EnvManager takes)."""
        return {name: self.env_actor(pool) for name, pool in cfg.pools.items()}

    # -- engines -------------------------------------------------------------------------------------------
    @property
    def engines(self) -> int:
        """Engine actors the run starts."""
        return engine_count(self.topology, self.num_engines)

    def engine(self, env_vars: dict[str, str] | None = None, group: Any = None) -> dict[str, Any]:
        """One engine actor. With tensor parallelism > 1, ``group`` is its placement group
        (:meth:`engine_group`): the actor takes bundle 0 and its TP workers the rest."""
        e = self.topology.engines
        opts: dict[str, Any] = {
            "num_cpus": e.num_cpus,
            "num_gpus": e.num_gpus if group is None else 0,
            **_resources(e.resource, 1),
            **self._runtime_env(dict(env_vars or {})),
        }
        if group is not None:
            opts["scheduling_strategy"] = _in_group(group, 0)
        return opts

    def engine_bundles(self) -> list[dict[str, float]]:
        """The placement-group bundles of one engine: one GPU per TP rank (its resource on the first)."""
        e = self.topology.engines
        per = e.num_gpus / e.tensor_parallel_size
        bundles: list[dict[str, float]] = [{"GPU": per} for _ in range(e.tensor_parallel_size)]
        bundles[0]["CPU"] = max(e.num_cpus, 0.0) or 0.001  # a bundle must reserve something besides GPUs
        if e.resource:
            bundles[0][e.resource] = 1.0
        return bundles

    def needs_engine_group(self) -> bool:
        """Whether an engine needs a placement group (TP > 1 spans several GPUs reserved together)."""
        return self.topology.engines.tensor_parallel_size > 1

    def engine_group(self) -> Any:
        """A placement group for one TP engine (STRICT_PACK: TP ranks share a node)."""
        from ray.util.placement_group import placement_group

        return placement_group(self.engine_bundles(), strategy="STRICT_PACK")

    # -- trainer -------------------------------------------------------------------------------------------
    def trainer_rank(self, rank: int, group: Any = None) -> dict[str, Any]:
        """One trainer rank actor: its GPUs (CUDA_VISIBLE_DEVICES set by Ray), CPUs and node resource.
        DeepSpeed picks its accelerator from the GPUs Ray gave the rank."""
        t = self.topology.trainer
        accel = "cuda" if t.gpus_per_rank > 0 else "cpu"
        opts: dict[str, Any] = {
            "num_cpus": t.cpus_per_rank,
            "num_gpus": t.gpus_per_rank,
            **_resources(t.resource, 1),
            **self._runtime_env({"DS_ACCELERATOR": accel}),
        }
        if group is not None:
            opts["scheduling_strategy"] = _in_group(group, rank)
            opts.pop("resources", None)  # reserved by the bundle
            opts["num_gpus"] = t.gpus_per_rank
        return opts

    def trainer_bundles(self) -> list[dict[str, float]]:
        """One bundle per trainer rank (GPUs, CPUs and resource of the rank)."""
        t = self.topology.trainer
        bundles = []
        for _ in range(t.ranks):
            b: dict[str, float] = {"CPU": max(t.cpus_per_rank, 0.0) or 0.001}
            if t.gpus_per_rank:
                b["GPU"] = t.gpus_per_rank
            if t.resource:
                b[t.resource] = 1.0
            bundles.append(b)
        return bundles

    def needs_trainer_group(self) -> bool:
        """Whether the trainer ranks are reserved together (several ranks: all or nothing, packed)."""
        return self.topology.trainer.ranks > 1

    def trainer_group(self) -> Any:
        """A placement group for the trainer ranks (PACK: as few nodes as fit, so ZeRO talks locally)."""
        from ray.util.placement_group import placement_group

        return placement_group(self.trainer_bundles(), strategy="PACK")

    # -- helpers -------------------------------------------------------------------------------------------
    def _runtime_env(self, env_vars: dict[str, str]) -> dict[str, Any]:
        merged = {**self.env_vars, **env_vars}
        return {"runtime_env": {"env_vars": merged}} if merged else {}


def _in_group(group: Any, bundle: int) -> Any:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(
        placement_group=group, placement_group_bundle_index=bundle, placement_group_capture_child_tasks=True
    )
