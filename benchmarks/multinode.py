"""Multi-node Ray on this machine: eval throughput on 1 node against 3, and weight-sync bandwidth across nodes
against the same sync within one node.

    python benchmarks/multinode.py [--quick] [--json benchmarks/results/multinode.json]

One loopback cluster (maigym_ray/runtime/local_cluster.py): a head and two workers started with ``ray start``,
each advertising ``web_host`` and a resource of its own (``on_head``, ``on_a``, ``on_b``). Within one run:

- ``episodes_per_s_1node``: a golden-policy eval with every env placed on the head (env host resource
  ``on_head``); ``episodes_per_s_3nodes``: the same eval with the envs spread over the three nodes
  (``web_host``, one unit per env, as many units per node as envs / 3). Same envs, tasks and concurrency.
- ``same_node_sync_gbps``: the trainer's bucketed broadcast (maigym_ray/weights/group.py) to a receiver on
  the sender's node; ``cross_node_sync_gbps``: to a receiver on another node. Best of several syncs each.

All nodes share this machine's 2 cores and its loopback, so 3 nodes add no cores: the eval comparison shows
the cost of spreading (scheduling, cross-raylet calls), and the sync comparison shows what the rendezvous and
the transport cost across raylets (target: cross-node >= 0.5x same-node).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, RayConfig
from maigym_ray.runtime.local_cluster import LocalCluster, NodeSpec
from maigym_ray.runtime.topology import DriverPlacementConfig, EnvHostConfig, TopologyConfig

ENVS = 3  # one per node in the spread run


def cluster() -> LocalCluster:
    return LocalCluster(
        NodeSpec("head", num_cpus=1, resources={"driver_host": 1, "web_host": 1, "on_head": 1}),
        [
            NodeSpec("worker_a", num_cpus=1, resources={"web_host": 1, "on_a": 1}),
            NodeSpec("worker_b", num_cpus=1, resources={"web_host": 1, "on_b": 1}),
        ],
        dashboard=False,
    )


def topology(host: EnvHostConfig) -> TopologyConfig:
    return TopologyConfig(
        name="bench", env_hosts={"web": host}, driver=DriverPlacementConfig(resource="driver_host")
    )


async def eval_rate(
    c: LocalCluster, host: EnvHostConfig, episodes: int, out: Path
) -> tuple[float, list[str]]:
    """Episodes per second of a golden eval with the envs placed by ``host``; returns it and the env nodes."""
    from maigym_ray.runtime.evaluation import evaluate
    from maigym_ray.runtime.schema import EvalConfig, TasksConfig, WandbConfig

    cfg = EvalConfig(
        ray=RayConfig(address=c.gcs_address),
        topology=topology(host),
        env=EnvManagerConfig(pools={"web": PoolConfig(target_size=ENVS, max_size=ENVS)}),
        tasks=TasksConfig(pool="builtin", limit=episodes),
        policy=PolicyConfig(kind="golden"),
        wandb=WandbConfig(mode="disabled"),
        concurrency=ENVS,
    )
    report = await evaluate(cfg, out)
    return report["episodes_per_s"], []


def sync_gbps(c: LocalCluster, total_mb: int, bucket_mb: int, repeats: int) -> dict[str, float]:
    """Bucketed broadcast bandwidth from a sender on worker B to a receiver on B and on A."""
    import ray
    import torch

    from maigym_ray.weights import group as wg

    torch.manual_seed(0)
    n = total_mb * (1 << 20) // 4
    named = [(f"w{i}", torch.randn(n // 16)) for i in range(16)]  # 16 tensors, like a layer stack's big ones
    layout = wg.layout(named, bucket_mb << 20)
    nbytes = sum(t.numel() * 4 for _, t in named)
    out: dict[str, float] = {}
    for label, where in (("same_node", "on_b"), ("cross_node", "on_a")):
        sender = ray.remote(wg.WeightSender).options(num_cpus=0, resources={"on_b": 0.01}).remote(named)
        recv = ray.remote(wg.WeightReceiverActor).options(num_cpus=0, resources={where: 0.01}).remote()
        group = f"bench-{label}"
        ray.get([sender.join.remote(2, group), recv.join.remote(2, 1, group)])
        best = float("inf")
        for _ in range(repeats):
            r = recv.receive_timed.remote(layout, group)
            s = sender.send.remote(layout, group)
            best = min(best, max(ray.get([r, s])))
        pending = recv.receive.remote(layout, group)
        ray.get(sender.send.remote(layout, group))
        _, got = ray.get(pending)
        assert all(torch.equal(got[k], t) for k, t in named), "received weights differ"
        out[f"{label}_sync_gbps"] = nbytes / best / 1e9
        ray.get([sender.leave.remote(group), recv.leave.remote(group)])
        ray.kill(sender)
        ray.kill(recv)
    out["sync_bytes"] = nbytes
    return out


def say(line: str) -> None:
    """A progress line while a person waits (the evals add their own per-episode progress)."""
    print(f"[multinode] {line}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--bucket-mb", type=int, default=8)
    args = ap.parse_args()
    episodes = 12 if args.quick else 36
    total_mb, repeats = (64, 3) if args.quick else (256, 5)
    c = cluster()
    t0 = time.perf_counter()
    try:
        say("1/4 starting a loopback cluster: a head and two workers (ray start, about a minute)")
        c.start()
        bringup = time.perf_counter() - t0
        tmp = Path(tempfile.mkdtemp(prefix="mn-bench-"))
        say(f"2/4 golden eval, {episodes} episodes, every env on the head (cluster up in {bringup:.0f} s)")
        one, _ = asyncio.run(
            eval_rate(c, EnvHostConfig(resource="on_head", resource_per_env=0.01), episodes, tmp / "1")
        )
        say(f"3/4 the same eval with the envs spread over the three nodes (1 node: {one:.2f} episodes/s)")
        three, _ = asyncio.run(
            eval_rate(c, EnvHostConfig(resource="web_host", resource_per_env=1.0), episodes, tmp / "3")
        )
        say(f"4/4 weight sync, {total_mb} MB x {repeats} to a receiver on the same node, then on another")
        sync = sync_gbps(c, total_mb, args.bucket_mb, repeats)
    finally:
        import ray

        ray.shutdown()
        c.stop()
    out = {
        "episodes_per_s_1node": one,
        "episodes_per_s_3nodes": three,
        "cross_node_sync_gbps": sync["cross_node_sync_gbps"],
        "same_node_sync_gbps": sync["same_node_sync_gbps"],
        "cross_over_same_sync": sync["cross_node_sync_gbps"] / sync["same_node_sync_gbps"],
        "three_over_one_episodes": three / one if one else 0.0,
        "sync_bytes": sync["sync_bytes"],
        "bucket_mb": args.bucket_mb,
        "episodes": episodes,
        "envs": ENVS,
        "cluster_bringup_s": bringup,
        "quick": args.quick,
    }
    print(f"{'figure':28s} {'value':>10s}")
    for k in ("episodes_per_s_1node", "episodes_per_s_3nodes", "same_node_sync_gbps", "cross_node_sync_gbps"):
        print(f"{k:28s} {out[k]:10.3f}")
    print(f"{'cross / same sync':28s} {out['cross_over_same_sync']:10.2f}  (target >= 0.5)")
    print(f"{'3 nodes / 1 node episodes':28s} {out['three_over_one_episodes']:10.2f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
