"""A real multi-node Ray cluster on this machine: a head and two worker nodes on loopback (each its own raylet,
object store, ports, runtime-env dir and custom resources; runtime/local_cluster.py says why not ``ray start``);
worker B advertises a GPU it does not have.

One cluster is shared by the module (it takes ~10 s to come up). The tests run in order; the last one kills
worker A. They check that actors land on the nodes their resources name (env actors by their host resource,
each node's own node services with them), that a weight broadcast from the trainer (worker B) to an engine's
node (worker A) is bit-identical, that ``ray job submit`` runs a short train run (engine on A, trainer on B,
weights broadcast across) and an eval to a report (the two jobs run at the same time), and that killing a
node mid-eval loses no episode.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, RayConfig

# A cluster of its own replaces the process's Ray connection, so scripts/test.sh runs this module in a pytest
# process of its own (marker 'multinode').
pytestmark = [pytest.mark.integration, pytest.mark.multinode]

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def _topology():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from maigym_ray.runtime.schema import register

    register()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="eval", overrides=["topology=loopback_3node"])
    return OmegaConf.to_object(cfg).topology


@pytest.fixture(scope="module")
def cluster():
    """Head (driver_host), worker A (web_host x2, engine_host), worker B (web_host x2, trainer_host, 1 GPU)."""
    import ray

    from maigym_ray.runtime.local_cluster import LOOPBACK_3NODE, LocalCluster

    had_local = ray.is_initialized()  # the session's local Ray (conftest.ray_local): restored afterwards
    if had_local:
        ray.shutdown()
    c = LocalCluster(*LOOPBACK_3NODE)
    try:
        c.start()
        yield c
    finally:
        ray.shutdown()
        c.stop()
        if had_local:
            from maigym_ray.runtime.ray_init import init_ray

            init_ray(RayConfig(num_cpus=2, object_store_mb=256))


def _node_of(ray, handle) -> str:
    return ray.get(
        handle.__ray_call__.remote(lambda self: __import__("ray").get_runtime_context().get_node_id())
    )


def test_the_driver_sits_on_the_head(cluster):
    import ray

    assert ray.get_runtime_context().get_node_id() == cluster.node_id("head")
    assert len([n for n in ray.nodes() if n["Alive"]]) == 3


async def test_actors_land_on_the_nodes_their_resources_name(cluster):
    import ray

    from maigym_ray.policy.engine import resolve_model
    from maigym_ray.rl.trainer import TrainerConfig
    from maigym_ray.runtime.session import Session
    from maigym_ray.weights.group import WeightReceiverActor

    topo = _topology()
    env = EnvManagerConfig(pools={"web": PoolConfig(target_size=4, max_size=4)})
    session = Session(RayConfig(address=cluster.gcs_address), env, PolicyConfig(), topo, trains=True)
    head, a, b = (cluster.node_id(n) for n in ("head", "worker_a", "worker_b"))
    try:
        manager = await session.start_envs()
        assert _node_of(ray, manager) == head  # the control plane sits with the driver
        leases = await manager.request.remote(4, "web")
        actors = [await manager.actor.remote(lease) for lease in leases]
        env_nodes = [_node_of(ray, h) for h in actors]
        services_nodes = [await h.services_node_id.remote() for h in actors]
        services = await manager.node_services.remote()
        for lease in leases:
            await manager.release.remote(lease)
        # web_host: 2 on each worker, one unit per env: two envs on each worker, none on the head
        assert sorted(env_nodes) == sorted([a, a, b, b]), env_nodes
        # node services: one set on each node that hosts env actors (none on the head), and every env actor
        # uses the set on its own node
        assert set(services) == {a, b}
        assert all(_node_of(ray, h) == node for node, h in services.items())
        assert services_nodes == env_nodes
        # an engine's options (engine_host) land it on worker A
        engine_like = ray.remote(WeightReceiverActor).options(**session.placement.engine()).remote()
        assert _node_of(ray, engine_like) == a
        ray.kill(engine_like)
        # the trainer rank asks for worker B's GPU: Ray gives it GPU 0, CUDA is absent, it trains on the CPU
        trainer = await asyncio.to_thread(session.start_trainer, resolve_model("tiny-text"), TrainerConfig())
        (info,) = trainer.info
        assert info["node_id"] == b
        assert info["cuda_visible_devices"] == "0" and info["gpu_ids"] == ["0"]
        assert info["device"] == "cpu" and "Ray assigned GPU ids" in info["device_reason"]
    finally:
        await session.stop()


def test_weight_sync_between_nodes_is_bit_identical(cluster):
    """Trainer rank 0 on worker B broadcasts (gloo, rendezvous on B's node IP) to a receiver on worker A."""
    import ray

    from maigym_ray.policy.engine import resolve_model
    from maigym_ray.rl.trainer import TrainerConfig
    from maigym_ray.runtime.placement import Placement
    from maigym_ray.weights.group import WeightReceiverActor

    topo = _topology()
    pl = Placement(topo)
    from maigym_ray.rl.trainer_group import TrainerGroup

    trainer = TrainerGroup(resolve_model("tiny-text"), TrainerConfig(), "torch", None, [pl.trainer_rank(0)])
    receiver = ray.remote(WeightReceiverActor).options(**pl.engine()).remote()
    try:
        assert trainer.info[0]["node_id"] == cluster.node_id("worker_b")
        assert _node_of(ray, receiver) == cluster.node_id("worker_a")
        layout = trainer.layout(64 << 10)  # several buckets
        assert len(layout) > 1
        joined = ray.get(
            [trainer.join_weight_group(2, "mn", "gloo"), receiver.join.remote(2, 1, "mn", "gloo")],
            timeout=120,
        )
        assert joined[0]["rendezvous"].startswith(f"{trainer.info[0]['node_ip']}:")
        got = receiver.receive.remote(layout, "mn")
        ray.get(trainer.send_weights(layout, "mn"), timeout=120)
        _, received = ray.get(got, timeout=120)
        want = dict(trainer.weights())
        assert set(received) == set(want)
        for name, t in want.items():
            assert received[name].dtype == t.dtype and torch.equal(received[name], t), name
    finally:
        ray.get(receiver.leave.remote("mn"))
        trainer.shutdown()
        ray.kill(receiver)


def _submit(cluster, cwd: Path, *args: str) -> subprocess.Popen[str]:
    """``launch/submit.py ARGS`` against the cluster's job server, started (not waited for); its output goes
    to files in ``cwd`` (a pipe nobody reads while another test runs could fill up and stall it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAIGYM_PYTHON", "RAY_AUTH_TOKEN_PATH")}
    env.update(RAY_ADDRESS=cluster.dashboard_url, RAY_AUTH_MODE="disabled")
    cmd = [sys.executable, str(ROOT / "launch" / "submit.py"), *args]
    with open(cwd / "submit.out", "w") as out, open(cwd / "submit.err", "w") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
    proc.cwd = cwd  # type: ignore[attr-defined]
    return proc


def _finish(proc: subprocess.Popen[str], timeout_s: float = 300) -> tuple[int, str, str]:
    """Waits for a ``_submit`` process; returns its exit status, stdout and stderr."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    cwd: Path = proc.cwd  # type: ignore[attr-defined]
    return proc.returncode, (cwd / "submit.out").read_text(), (cwd / "submit.err").read_text()


@pytest.fixture(scope="module")
def eval_job(cluster, tmp_path_factory):
    """The submitted eval, started when first asked for and left running. The train test asks first, so the
    eval (golden policy: no engine; 2 of the 4 web_host units, the train job takes the other 2) runs alongside
    the train job and the module stays short; its own test then waits for it."""
    tmp = tmp_path_factory.mktemp("submit-eval")
    out = tmp / "eval"
    proc = _submit(
        cluster,
        tmp,
        "--submission-id=mn-eval",
        "maigym_ray.cli.eval",
        "topology=loopback_3node",
        "policy.kind=golden",
        "tasks.limit=4",
        "concurrency=2",
        "env.pools.web.target_size=2",
        "env.pools.web.max_size=2",
        f"output_dir={out}",
        "wandb.mode=disabled",
    )
    yield out, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_ray_job_submit_runs_a_short_train_run_across_nodes(cluster, tmp_path, eval_job):
    """The engine on worker A, the trainer on worker B: SFT and one GRPO round broadcast weights across.
    (``eval_job`` starts the eval job alongside; see the fixture.)"""
    out = tmp_path / "train"
    rc, stdout, stderr = _finish(
        _submit(
            cluster,
            tmp_path,
            "--submission-id=mn-train",
            "maigym_ray.cli.train",
            "topology=loopback_3node",
            "tasks.pool=curriculum",  # no synthesis stage: the multi-node part is what this test is for
            "tasks.limit=8",  # 6 train, 2 held-out
            "env.pools.web.target_size=2",
            "env.pools.web.max_size=2",
            "driver.concurrency=2",
            "driver.sft.steps=1",
            "driver.sft.demos_per_task=1",
            "driver.heldout.episodes_per_task=1",
            "driver.grpo.rounds=1",
            "driver.grpo.groups_per_round=2",
            "sampler.group_size=2",
            "policy.sampling.max_tokens=8",
            f"output_dir={out}",
            "wandb.mode=disabled",
        )
    )
    assert rc == 0, stdout[-4000:] + stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    # the SFT warm-up ends with a broadcast from the trainer to the engine: version 1 at least
    assert report["rounds"] == 1 and report["policy_version"] >= 1
    assert "trains on cpu: Ray assigned GPU ids ['0']" in stdout  # the rank's log, from worker B
    # where the job's roles ran (Ray keeps dead actors' records): engine on A, trainer on B, driver on the head
    from ray.job_submission import JobSubmissionClient
    from ray.util.state import list_actors

    job_id = JobSubmissionClient(cluster.dashboard_url).get_job_info("mn-train").driver_info.id
    nodes = {
        cls: {a.node_id for a in list_actors(filters=[("class_name", "=", cls), ("job_id", "=", job_id)])}
        for cls in ("EngineActor", "TrainerRank", "Driver", "NodeServices")
    }
    assert nodes["EngineActor"] == {cluster.node_id("worker_a")}, nodes
    assert nodes["TrainerRank"] == {cluster.node_id("worker_b")}, nodes
    assert nodes["Driver"] == {cluster.node_id("head")}, nodes
    assert nodes["NodeServices"] <= {cluster.node_id("worker_a"), cluster.node_id("worker_b")}, nodes


def test_ray_job_submit_runs_an_eval_to_a_report(eval_job):
    out, proc = eval_job
    rc, stdout, stderr = _finish(proc)
    assert rc == 0, stdout[-4000:] + stderr[-3000:]
    assert "mn-eval SUCCEEDED" in stdout
    report = json.loads((out / "report.json").read_text())
    assert report["episodes"] == 4 and report["success_rate"] == 1.0 and report["infra_failed"] == 0


async def test_killing_a_worker_mid_eval_loses_no_episode(cluster, tmp_path):
    """Worker A dies while its envs run episodes: those end as infrastructure failures and are retried on
    worker B's envs; every episode is accounted for and scored."""
    from maigym_ray.runtime.evaluation import evaluate
    from maigym_ray.runtime.schema import EvalConfig, TasksConfig, WandbConfig

    topo = _topology()
    cfg = EvalConfig(
        ray=RayConfig(address=cluster.gcs_address),
        topology=topo,
        env=EnvManagerConfig(pools={"web": PoolConfig(target_size=4, max_size=4)}),
        tasks=TasksConfig(pool="builtin", limit=12),
        policy=PolicyConfig(kind="golden"),
        wandb=WandbConfig(mode="disabled"),
        concurrency=4,
        infra_retries=3,
    )
    cfg = replace(cfg, env=replace(cfg.env, start_timeout_s=20.0))
    done: list = []
    killed = asyncio.Event()

    def seen(traj) -> None:
        done.append(traj)
        if len(done) == 2 and not killed.is_set():
            killed.set()
            asyncio.get_running_loop().run_in_executor(None, cluster.kill, "worker_a")

    report = await evaluate(cfg, tmp_path / "kill", on_trajectory=seen)
    assert killed.is_set()
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "kill" / "results.parquet").to_pylist()
    from maigym_ray.tasks.pool import TaskPool

    # tasks.limit applies after the platform filter (runtime/pools.route_tasks): the first 12 web tasks.
    expected = min(12, sum("web" in t.platforms for t in TaskPool.builtin()))
    assert expected == 12
    assert len(rows) == report["episodes"] == expected  # no episode lost
    assert report["infra_failed"] == 0 and report["success_rate"] == 1.0  # every one retried and scored
    assert any(r["attempt"] > 0 for r in rows), "no episode was interrupted by the node loss"
