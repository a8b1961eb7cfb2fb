"""Topology: where every role of a run is placed and what it takes (typed config, checked before anything starts).

A topology names the roles of a run and the resources each one asks Ray for: env hosts per platform, the policy
engines, the trainer ranks, the driver, and how weights travel from the trainer to the engines. It also
declares the cluster it is meant for (``cluster``), so that an impossible topology is a :class:`ConfigError`
that names what is short, raised before a single actor starts. ``conf/topology/`` ships the configs;
:mod:`maigym_ray.runtime.placement` turns one into Ray options and placement groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from maigym_ray.envs.config import check_choice
from maigym_ray.errors import ConfigError
from maigym_ray.rl.strategies import TRAINER_STRATEGIES, strategy_options

MODES = ("disaggregated", "colocated")
#: the weight sync's collective backends, each with the device its tensors must be on (weights/group.py).
SYNC_BACKENDS = {"gloo": "cpu", "nccl": "cuda"}
RENDEZVOUS = ("auto", "node_ip", "loopback")


@dataclass
class EnvHostConfig:
    """What one env actor of a platform takes, and which nodes host it."""

    #: custom Ray resource that the nodes hosting this platform advertise (e.g. "web_host"); "" = any node.
    resource: str = ""
    #: units of ``resource`` each env actor takes (a fraction packs many envs onto one host node).
    resource_per_env: float = 0.01
    #: CPUs reserved per env actor; -1 keeps the pool's own ``num_cpus`` (env.pools.<name>.num_cpus).
    num_cpus: float = -1.0
    #: memory reserved per env actor, MB (0 = none reserved; Ray then only places by CPU and resource).
    memory_mb: int = 0
    #: env instances of this platform the topology plans for (capacity check only; 0 = the pools' max_size).
    envs: int = 0


@dataclass
class EnginesConfig:
    """The policy engines (one vLLM engine per actor)."""

    #: engine actors; 0 = ``policy.num_engines``.
    count: int = 0
    #: GPUs per engine (0 = CPU engine).
    num_gpus: float = 0.0
    #: vLLM tensor-parallel size; must divide ``num_gpus`` (and be 1 on CPU).
    tensor_parallel_size: int = 1
    #: CPUs reserved per engine (0: the engine mostly waits on its own engine-core process).
    num_cpus: float = 0.0
    #: custom Ray resource the engine's node must advertise ("" = any node); one unit per engine.
    resource: str = ""


@dataclass
class TrainerPlacementConfig:
    """The trainer, as its own actor group (one actor per rank)."""

    #: trainer ranks (data parallel); "torch" runs exactly one.
    ranks: int = 1
    #: GPUs per rank (0 = train on CPU).
    gpus_per_rank: float = 0.0
    #: CPUs reserved per rank (0 lets the rank share the node's cores with the rollouts, as the debug run does).
    cpus_per_rank: float = 0.0
    #: a registered trainer strategy (rl/strategies.py): "torch" (one plain-torch rank), "deepspeed" (ZeRO data
    #: parallel over ``ranks``) or one a package adds (entry-point group maigym_ray.trainer_strategies).
    strategy: str = "torch"
    #: the strategy's own settings, read into its registered class (``TrainerStrategy.options``; deepspeed:
    #: rl/strategies.DeepSpeedConfig's zero_stage). ``trainer_strategy=deepspeed`` (Hydra group) sets the strategy
    #: with every setting, so ``topology.trainer.options.zero_stage=1`` then needs no "+".
    options: dict[str, Any] = field(default_factory=dict)
    #: custom Ray resource the trainer's node(s) must advertise ("" = any node); one unit per rank.
    resource: str = ""
    #: torch threads per rank (0 = every core of its node).
    torch_threads: int = 0


@dataclass
class DriverPlacementConfig:
    """The driver actor (it orchestrates and holds no model)."""

    #: CPUs reserved for the driver.
    num_cpus: float = 0.0
    #: custom Ray resource its node must advertise ("" = any node, usually the head).
    resource: str = ""


@dataclass
class WeightSyncConfig:
    """How weights travel from trainer rank 0 to every engine."""

    #: "gloo" (CPU tensors) or "nccl" (trainer and engines on GPUs).
    backend: str = "gloo"
    #: where the group meets: "auto" (loopback on a local Ray, else the trainer node's IP from Ray),
    #: "node_ip" (always the trainer node's IP) or "loopback" (one-machine clusters).
    rendezvous: str = "auto"
    #: flat bucket size, MB (one broadcast per bucket).
    bucket_mb: int = 8


@dataclass
class ClusterSpec:
    """The cluster a topology is written for (what Ray would report); 0 = unknown, not checked."""

    #: nodes in the cluster.
    nodes: int = 0
    #: GPUs in the whole cluster.
    gpus: int = 0
    #: GPUs per node (a rank or an engine never spans nodes).
    gpus_per_node: int = 0
    #: CPUs in the whole cluster.
    cpus: int = 0
    #: custom resources in the whole cluster, e.g. {"web_host": 100}.
    resources: dict[str, float] = field(default_factory=dict)


@dataclass
class TopologyConfig:
    """Every role of a run and what it takes; see the module docstring."""

    #: a name for the topology (logs, reports).
    name: str = "local"
    #: "disaggregated" (engines and trainer on their own GPUs) or "colocated" (they share GPUs and take turns).
    mode: str = "disaggregated"
    #: env hosts per platform (web, mobile_web, android, desktop); a platform missing here runs anywhere.
    env_hosts: dict[str, EnvHostConfig] = field(default_factory=dict)
    engines: EnginesConfig = field(default_factory=EnginesConfig)
    trainer: TrainerPlacementConfig = field(default_factory=TrainerPlacementConfig)
    driver: DriverPlacementConfig = field(default_factory=DriverPlacementConfig)
    weight_sync: WeightSyncConfig = field(default_factory=WeightSyncConfig)
    #: the cluster this topology is meant for (checked before anything starts).
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    #: platforms whose env hosts must be declared (a platform with no host kind is then an error).
    require_hosts: bool = False


@dataclass(frozen=True)
class Demand:
    """What a topology asks of the cluster in total."""

    gpus: float
    engine_gpus: float
    trainer_gpus: float
    cpus: float
    resources: dict[str, float]
    envs: dict[str, int]


def engine_count(topo: TopologyConfig, num_engines: int) -> int:
    """Engines the run starts: ``topology.engines.count`` or else ``policy.num_engines``."""
    return topo.engines.count or num_engines


def demand(
    topo: TopologyConfig, platforms: dict[str, int], num_engines: int = 1, trainer: bool = True
) -> Demand:
    """The totals ``topo`` asks for. ``platforms``: platform -> env instances the pools may hold;
    ``num_engines`` 0 and ``trainer`` False leave out the roles a run does not start (an eval has no trainer)."""
    engines = engine_count(topo, num_engines) if num_engines else 0
    engine_gpus = engines * topo.engines.num_gpus
    ranks = topo.trainer.ranks if trainer else 0
    trainer_gpus = ranks * topo.trainer.gpus_per_rank
    # Colocated engines and trainer share GPUs: the larger of the two is what the cluster must have.
    gpus = max(engine_gpus, trainer_gpus) if topo.mode == "colocated" else engine_gpus + trainer_gpus
    resources: dict[str, float] = {}
    envs: dict[str, int] = {}
    cpus = engines * topo.engines.num_cpus + ranks * topo.trainer.cpus_per_rank
    cpus += topo.driver.num_cpus
    for plat, pool_envs in platforms.items():
        host = topo.env_hosts.get(plat, EnvHostConfig())
        n = host.envs or pool_envs
        envs[plat] = n
        cpus += n * max(0.0, host.num_cpus)
        if host.resource:
            resources[host.resource] = resources.get(host.resource, 0.0) + n * host.resource_per_env
    for res, amount in ((topo.engines.resource, engines), (topo.trainer.resource, ranks)):
        if res:
            resources[res] = resources.get(res, 0.0) + amount
    if topo.driver.resource:
        resources[topo.driver.resource] = resources.get(topo.driver.resource, 0.0) + 1
    return Demand(gpus, engine_gpus, trainer_gpus, cpus, resources, envs)


def validate(
    topo: TopologyConfig, platforms: dict[str, int], num_engines: int = 1, trainer: bool = True
) -> Demand:
    """Raises :class:`ConfigError` naming what is short or inconsistent; returns the demand otherwise.

    ``platforms``: platform -> env instances the configured pools may hold (``max_size`` summed per platform);
    ``num_engines`` (0: the run starts no engine) and ``trainer`` as in :func:`demand`.
    """
    check_choice("topology.mode", topo.mode, MODES)
    strategy = TRAINER_STRATEGIES.load(topo.trainer.strategy)  # unknown: a ConfigError listing the registered
    check_choice("topology.weight_sync.backend", topo.weight_sync.backend, tuple(SYNC_BACKENDS))
    check_choice("topology.weight_sync.rendezvous", topo.weight_sync.rendezvous, RENDEZVOUS)
    e, t = topo.engines, topo.trainer
    engines = engine_count(topo, num_engines) if num_engines else 0
    if e.count < 0:
        raise ConfigError(f"topology.engines.count={e.count}: must be >= 0")
    if e.tensor_parallel_size < 1:
        raise ConfigError(f"topology.engines.tensor_parallel_size={e.tensor_parallel_size}: must be >= 1")
    if e.num_gpus < 0 or t.gpus_per_rank < 0:
        raise ConfigError("topology: GPU counts must be >= 0")
    if e.num_gpus == 0 and e.tensor_parallel_size != 1:
        raise ConfigError(
            f"topology.engines.tensor_parallel_size={e.tensor_parallel_size} needs GPUs: engines.num_gpus is 0"
        )
    if e.num_gpus > 0:
        if e.num_gpus >= 1 and not float(e.num_gpus).is_integer():
            raise ConfigError(f"topology.engines.num_gpus={e.num_gpus}: a multi-GPU engine takes whole GPUs")
        if e.num_gpus >= 1 and int(e.num_gpus) % e.tensor_parallel_size:
            raise ConfigError(
                f"topology.engines.tensor_parallel_size={e.tensor_parallel_size} does not divide the engine's "
                f"{e.num_gpus:g} GPUs"
            )
        if e.num_gpus < 1 and e.tensor_parallel_size != 1:
            raise ConfigError(
                f"topology.engines.tensor_parallel_size={e.tensor_parallel_size} needs whole GPUs; the "
                f"engine has {e.num_gpus:g}"
            )
    if t.ranks < 1:
        raise ConfigError(f"topology.trainer.ranks={t.ranks}: must be >= 1")
    strategy.check(t, strategy_options(t, "topology.trainer"), "topology.trainer")
    backend = topo.weight_sync.backend
    if SYNC_BACKENDS[backend] == "cuda" and (t.gpus_per_rank == 0 or e.num_gpus == 0):
        raise ConfigError(
            f"topology.weight_sync.backend={backend} needs GPUs on the trainer and the engines, it moves CUDA "
            f"tensors only (trainer.gpus_per_rank={t.gpus_per_rank:g}, engines.num_gpus={e.num_gpus:g}); use gloo"
        )
    if topo.mode == "colocated" and (t.gpus_per_rank == 0 or e.num_gpus == 0):
        raise ConfigError("topology.mode=colocated shares GPUs: both trainer and engines need num_gpus > 0")
    if topo.weight_sync.bucket_mb < 1:
        raise ConfigError(f"topology.weight_sync.bucket_mb={topo.weight_sync.bucket_mb}: must be >= 1")
    for plat in platforms:
        if plat not in topo.env_hosts and topo.require_hosts:
            raise ConfigError(
                f"platform {plat!r} has no host kind in topology.env_hosts (declared: "
                f"{', '.join(sorted(topo.env_hosts)) or 'none'})"
            )
    d = demand(topo, platforms, num_engines, trainer)
    c = topo.cluster
    short: list[str] = []
    if c.gpus and d.gpus > c.gpus:
        short.append(
            f"GPUs: the topology needs {d.gpus:g} ({d.engine_gpus:g} for {engines} engines + "
            f"{d.trainer_gpus:g} for {t.ranks if trainer else 0} trainer ranks{', shared' if topo.mode == 'colocated' else ''}), "
            f"the cluster has {c.gpus}"
        )
    if c.gpus_per_node:
        for what, per in (("an engine", e.num_gpus), ("a trainer rank", t.gpus_per_rank)):
            if per > c.gpus_per_node:
                short.append(f"GPUs per node: {what} needs {per:g}, a node has {c.gpus_per_node}")
    if c.cpus and d.cpus > c.cpus:
        short.append(f"CPUs: the topology reserves {d.cpus:g}, the cluster has {c.cpus}")
    if c.resources or c.nodes:
        for res, amount in sorted(d.resources.items()):
            have = c.resources.get(res, 0.0)
            if amount > have + 1e-9:
                short.append(f"resource {res!r}: the topology needs {amount:g}, the cluster has {have:g}")
    if short:
        raise ConfigError(f"topology {topo.name!r} does not fit its cluster: " + "; ".join(short))
    return d


def gpus_in_use(topo: TopologyConfig, num_engines: int = 1) -> int:
    """Whole GPUs the topology occupies (for reports)."""
    return math.ceil(demand(topo, {}, num_engines).gpus)
