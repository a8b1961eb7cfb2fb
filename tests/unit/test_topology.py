"""Topologies: every shipped one builds placement options; paper_9b adds up against its cluster; impossible
topologies are ConfigErrors that name the shortfall, raised before anything starts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.errors import ConfigError
from maigym_ray.runtime.placement import Placement
from maigym_ray.runtime.schema import TrainConfig, register
from maigym_ray.runtime.session import Session, pool_capacity
from maigym_ray.runtime.topology import (
    ClusterSpec,
    EnginesConfig,
    EnvHostConfig,
    TopologyConfig,
    TrainerPlacementConfig,
    WeightSyncConfig,
    demand,
    validate,
)

pytestmark = pytest.mark.unit

CONF = Path(__file__).resolve().parents[2] / "conf"
TOPOLOGIES = sorted(p.stem for p in (CONF / "topology").glob("*.yaml"))
register()


def _train_cfg(topology: str) -> TrainConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"topology={topology}"])
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def test_the_four_topologies_ship():
    assert {"local", "cluster_cpu", "gpu_1node", "paper_9b"} <= set(TOPOLOGIES)


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_every_shipped_topology_builds_options_for_every_role(name):
    cfg = _train_cfg(name)
    topo = cfg.topology
    assert isinstance(topo, TopologyConfig) and topo.name == name
    platforms = {p: topo.env_hosts[p].envs for p in topo.env_hosts if topo.env_hosts[p].envs}
    validate(topo, platforms or pool_capacity(cfg.env), cfg.policy.num_engines)
    pl = Placement(topo, cfg.policy.num_engines)
    for opts in (pl.driver(), pl.env_manager(), pl.node_services("ab" * 28), pl.rollout_task()):
        assert opts["num_cpus"] >= 0
    for pool in cfg.env.pools.values():
        host = topo.env_hosts.get(pool.platform)
        opts = pl.env_actor(pool)
        if host is not None and host.resource:
            assert opts["resources"] == {host.resource: host.resource_per_env}
        if host is not None and host.num_cpus >= 0:
            assert opts["num_cpus"] == host.num_cpus
        else:
            assert opts["num_cpus"] == pool.num_cpus
    eng = pl.engine({"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert eng["num_gpus"] == topo.engines.num_gpus
    assert eng["runtime_env"]["env_vars"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    if topo.engines.tensor_parallel_size > 1:
        bundles = pl.engine_bundles()
        assert len(bundles) == topo.engines.tensor_parallel_size
        assert sum(b["GPU"] for b in bundles) == topo.engines.num_gpus
    for r in range(topo.trainer.ranks):
        t = pl.trainer_rank(r)
        assert t["num_gpus"] == topo.trainer.gpus_per_rank
        want = "cuda" if topo.trainer.gpus_per_rank else "cpu"
        assert t["runtime_env"]["env_vars"]["DS_ACCELERATOR"] == want
    assert len(pl.trainer_bundles()) == topo.trainer.ranks


def test_local_topology_is_todays_debug_run():
    topo = _train_cfg("local").topology
    pl = Placement(topo, num_engines=1)
    assert pl.engines == 1 and pl.engine()["num_gpus"] == 0 and "resources" not in pl.engine()
    assert pl.trainer_rank(0)["num_gpus"] == 0 and topo.weight_sync.backend == "gloo"
    pool = PoolConfig(num_cpus=0.25)
    assert pl.env_actor(pool)["num_cpus"] == 0.25 and "resources" not in pl.env_actor(pool)


def test_paper_9b_adds_up():
    topo = _train_cfg("paper_9b").topology
    d = validate(topo, {"web": 1, "android": 1, "desktop": 1})
    assert d.gpus == 512 == topo.cluster.gpus
    assert d.engine_gpus == 256 and d.trainer_gpus == 256
    assert sum(d.envs.values()) == 20_000
    assert d.cpus <= topo.cluster.cpus
    for res, amount in d.resources.items():
        assert amount <= topo.cluster.resources[res], res
    # the engine's TP divides its GPUs, and every rank and engine fits one node
    assert topo.engines.num_gpus % topo.engines.tensor_parallel_size == 0
    assert topo.engines.num_gpus <= topo.cluster.gpus_per_node
    # one more engine does not fit: the check is real
    with pytest.raises(ConfigError, match=r"GPUs: the topology needs 516"):
        validate(replace(topo, engines=replace(topo.engines, count=65)), {"web": 1})


def _gpu_topo(**kw) -> TopologyConfig:
    base = TopologyConfig(
        name="t",
        engines=EnginesConfig(count=2, num_gpus=2, tensor_parallel_size=2),
        trainer=TrainerPlacementConfig(ranks=2, gpus_per_rank=1, strategy="deepspeed"),
        weight_sync=WeightSyncConfig(backend="nccl"),
        cluster=ClusterSpec(nodes=1, gpus=8, gpus_per_node=8),
    )
    return replace(base, **kw)


@pytest.mark.parametrize(
    ("topo", "platforms", "match"),
    [
        (_gpu_topo(cluster=ClusterSpec(gpus=4)), {}, r"GPUs: the topology needs 6 .*the cluster has 4"),
        (
            _gpu_topo(engines=EnginesConfig(count=1, num_gpus=4, tensor_parallel_size=3)),
            {},
            r"tensor_parallel_size=3 does not divide the engine's 4 GPUs",
        ),
        (
            _gpu_topo(env_hosts={"web": EnvHostConfig(resource="web_host")}, require_hosts=True),
            {"web": 4, "android": 2},
            r"platform 'android' has no host kind",
        ),
        (
            _gpu_topo(
                env_hosts={"web": EnvHostConfig(resource="web_host", resource_per_env=1)},
                cluster=ClusterSpec(gpus=8, resources={"web_host": 10}),
            ),
            {"web": 12},
            r"resource 'web_host': the topology needs 12, the cluster has 10",
        ),
        (
            _gpu_topo(cluster=ClusterSpec(gpus=64, gpus_per_node=1)),
            {},
            r"GPUs per node: an engine needs 2, a node has 1",
        ),
        (
            _gpu_topo(trainer=TrainerPlacementConfig(gpus_per_rank=0)),
            {},
            r"nccl needs GPUs on the trainer and the engines",
        ),
        (
            TopologyConfig(engines=EnginesConfig(tensor_parallel_size=2)),
            {},
            r"tensor_parallel_size=2 needs GPUs",
        ),
        (TopologyConfig(trainer=TrainerPlacementConfig(ranks=2)), {}, r"strategy torch runs one rank"),
        # a strategy's settings are its own typed config (TrainerStrategy.options), checked with their key path
        (
            _gpu_topo(trainer=TrainerPlacementConfig(2, 1, strategy="deepspeed", options={"zero_stage": 3})),
            {},
            r"topology\.trainer\.options\.zero_stage=3: the DeepSpeed strategy supports 1 or 2",
        ),
        (
            _gpu_topo(trainer=TrainerPlacementConfig(2, 1, strategy="deepspeed", options={"stage": 1})),
            {},
            r"topology\.trainer\.options\.stage: .*trainer strategy 'deepspeed' takes: zero_stage",
        ),
        (
            TopologyConfig(trainer=TrainerPlacementConfig(options={"zero_stage": 2})),
            {},
            r"topology\.trainer\.options: trainer strategy 'torch' takes no options",
        ),
        (TopologyConfig(mode="shared"), {}, r"topology.mode='shared' is not valid"),
    ],
)
def test_impossible_topologies_name_the_shortfall(topo, platforms, match):
    with pytest.raises(ConfigError, match=match):
        validate(topo, platforms, num_engines=1)


def test_colocated_engines_and_trainer_share_gpus():
    topo = _gpu_topo(mode="colocated", cluster=ClusterSpec(gpus=4))
    assert demand(topo, {}).gpus == 4  # max(2 engines x 2, 2 ranks x 1), not the sum
    validate(topo, {})


def test_an_eval_does_not_count_the_trainer():
    topo = _gpu_topo(cluster=ClusterSpec(gpus=4))
    validate(topo, {}, num_engines=1, trainer=False)  # 4 engine GPUs fit; the trainer is not started
    with pytest.raises(ConfigError):
        validate(topo, {}, num_engines=1, trainer=True)


def test_session_refuses_an_impossible_topology_before_starting_anything(monkeypatch):
    from maigym_ray.config import PolicyConfig, RayConfig
    from maigym_ray.runtime import ray_init, session

    started: list[str] = []  # another test may have started Ray already: watch the calls, not the state
    monkeypatch.setattr(ray_init, "init_ray", lambda *a, **k: started.append("init_ray"))
    monkeypatch.setattr(session.Session, "init_ray", lambda self: started.append("Session.init_ray"))
    topo = _gpu_topo(cluster=ClusterSpec(gpus=2))
    env = EnvManagerConfig(pools={"web": PoolConfig()})
    with pytest.raises(ConfigError, match="does not fit"):
        Session(RayConfig(), env, PolicyConfig(kind="engine"), topo, trains=True)
    assert started == []
