"""The control plane at 20,000 environments: the EnvManager's own ControlPlane, sharded under a Coordinator,
on a simulated clock against the reference's bring-up and reset times; then the real actor path.

    python benchmarks/scale_sim.py [--instances 20000] [--actors 256] [--quick] [--json PATH]
    python benchmarks/scale_sim.py --async [--quick] [--json PATH]

``--async``: synchronous against asynchronous GRPO at the reference's shape (512 GPUs, 20,000 environments, a
9B model), the driver's own scheduler on simulated time (maigym_ray/testing/rl_sim.py, whose SimCosts state
every cost assumed): ``gpu_idle_share_sync``, ``gpu_idle_share_async`` and ``episodes_per_hour`` per arm, each
arm at its best point of a sweep over the trainer's share of the GPUs (and for sync, the round size).

The control plane:

- Simulated (maigym_ray/testing/scale_sim.py): a mixed fleet of ``--instances`` (60% browser, 25% desktop,
  15% Android, every instance held: target = max), sharded at 2,500 instances per shard. It is brought up
  (per-host limits of maigym_ray/testing/sim_backend.py), then 1.02 callers per instance lease, reset, hold
  an episode (median 60 s) and release for ``--sim-seconds`` simulated seconds, with 2% failed resets and
  bring-ups, 1% slow outliers, recycling after 10 episodes, health checks in rotation, and shard 1 killed
  half-way and rebuilt 10 s later from its actors' state.
- ``lease_p50_ms``/``lease_p99_ms``: thread CPU time the control plane spends per lease (the request call,
  plus for a queued caller the call that granted it), not the simulated wait for a free instance;
  ``manager_cpu_s_per_1k_leases``: every control-plane call (provisioning, health, releases, the rebuild)
  per 1,000 leases.
- ``bringup_1000_s``: simulated seconds until 1,000 fresh browser instances are all up (the other platforms
  are under ``conditions``); ``bringup_20000_s``: the mixed 20,000 fleet.
- ``lost_leases``/``double_leases``: from a ledger kept apart from the control plane (see ScaleSim._audit).
- Real actors: one EnvManager Ray actor (the same ControlPlane inside) over ``--actors`` EnvActor Ray actors
  on the fake backend (no browser); ``actor_lease_p99_ms`` is a caller's request+grant round trip with 16
  callers leasing and releasing concurrently (one caller alone: ``conditions.actor_lease_p99_ms_1_caller``).
  256 actors is what this 2-core, 24 GiB machine holds beside other jobs (about 50 MB per actor process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.config import EnvManagerConfig, PoolConfig, RayConfig, ShardingConfig
from maigym_ray.testing.rl_sim import RLSim, SimCosts, SimRun
from maigym_ray.testing.scale_sim import ScaleSim, SimWorkload, fleet
from maigym_ray.testing.sim_backend import SimBackendConfig

MIX = {"web": 0.60, "desktop": 0.25, "android": 0.15}
SHARDING = ShardingConfig(instances_per_shard=2500)


def simulate(instances: int, seconds: float) -> dict[str, Any]:
    """The leasing run at ``instances`` with a shard killed mid-run."""
    r = ScaleSim(fleet(instances, MIX), SHARDING, workload=SimWorkload(duration_s=seconds)).run()
    return {
        "result": r,
        "lease_p50_ms": r.percentile_ms(0.50),
        "lease_p99_ms": r.percentile_ms(0.99),
        "manager_cpu_s_per_1k_leases": 1000.0 * r.manager_cpu_s / max(1, r.leases),
    }


def bringup(instances: int, mix: dict[str, float], seed: int = 0) -> float:
    """Simulated seconds until a fresh fleet is entirely up."""
    sim = ScaleSim(fleet(instances, mix), SHARDING, backend=SimBackendConfig(seed=seed))
    return sim.run(lease_phase=False).bringup_s


async def _lease_loop(m: Any, n: int, out: list[float]) -> None:
    for _ in range(n):
        t0 = time.perf_counter()
        (lease,) = await m.request.remote(1, "web")
        out.append(time.perf_counter() - t0)
        await m.release.remote(lease)


def real_actors(actors: int, leases: int, callers: int = 16) -> dict[str, Any]:
    """One EnvManager actor over ``actors`` fake-backend EnvActors: bring-up time and lease round trips."""
    import ray

    from maigym_ray.envs.manager import EnvManager
    from maigym_ray.runtime.ray_init import init_ray

    init_ray(RayConfig(num_cpus=2, object_store_mb=256))
    cfg = EnvManagerConfig(
        pools={"web": PoolConfig(backend="fake", target_size=actors, max_size=actors, recycle_after=0)},
        apps=["notes"],
        start_timeout_s=600.0,
        health_interval_s=30.0,
        health_batch=16,
    )
    m = ray.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg)
    try:
        t0 = time.perf_counter()
        ray.get(m.start.remote(wait=True), timeout=1200)
        ready_s = time.perf_counter() - t0
        lat: list[float] = []

        async def drive() -> None:
            per = max(1, leases // callers)
            await asyncio.gather(*(_lease_loop(m, per, lat) for _ in range(callers)))

        solo: list[float] = []
        asyncio.run(_lease_loop(m, max(50, leases // 4), solo))  # one caller: the unloaded round trip
        t1 = time.perf_counter()
        asyncio.run(drive())
        wall = time.perf_counter() - t1
        metrics = ray.get(m.metrics.remote())
        xs, ys = sorted(lat), sorted(solo)
        return {
            "actor_lease_p50_ms_1_caller": 1000.0 * ys[len(ys) // 2],
            "actor_lease_p99_ms_1_caller": 1000.0 * ys[min(len(ys) - 1, int(0.99 * len(ys)))],
            "actors_measured": metrics["pools"]["web"]["size"],
            "actor_lease_p50_ms": 1000.0 * xs[len(xs) // 2],
            "actor_lease_p99_ms": 1000.0 * xs[min(len(xs) - 1, int(0.99 * len(xs)))],
            "actor_leases": len(xs),
            "actor_leases_per_s": len(xs) / wall,
            "actor_bringup_s": ready_s,
            "manager_request_p95_ms": 1000.0 * metrics["latency"]["request"]["p95_s"],
        }
    finally:
        try:
            ray.get(m.shutdown.remote(), timeout=300)
        finally:
            ray.kill(m)
            ray.shutdown()


def rl_at_scale(quick: bool) -> dict[str, Any]:
    """``--async``: synchronous against asynchronous GRPO at the reference's shape (maigym_ray/testing/rl_sim.py),
    each arm at its best trainer share (and sync at its best round size), over a sweep."""
    shape = {"gpus": 512, "environments": 20000}
    shares = (384, 416)
    rounds = {"async": (1024,), "sync": (1024, 2500)}  # sync's best may fill every environment each round
    if quick:
        shape, shares, rounds = {"gpus": 64, "environments": 2000}, (50,), {"async": (128,), "sync": (128,)}
    sweep: list[dict[str, Any]] = []
    for arm, sizes in rounds.items():
        for groups in sizes:
            for trainer in shares:
                run = SimRun(
                    trainer_gpus=trainer,
                    groups_per_update=groups,
                    max_staleness=ASYNC_STALENESS if arm == "async" else 0,
                    updates=2 if quick else 5,
                    **shape,
                )
                t0 = time.perf_counter()
                r = RLSim(run).run()
                sweep.append({"arm": arm, **asdict(run), **asdict(r), "wall_s": time.perf_counter() - t0})
    best = {a: min((x for x in sweep if x["arm"] == a), key=lambda x: x["gpu_idle_share"]) for a in rounds}
    return {
        "gpu_idle_share_sync": best["sync"]["gpu_idle_share"],
        "gpu_idle_share_async": best["async"]["gpu_idle_share"],
        "episodes_per_hour": {a: best[a]["episodes_per_hour"] for a in best},
        "best": best,
        "sweep": sweep,
        "costs": asdict(SimCosts()),
        "quick": quick,
    }


#: the staleness bound of the simulated async arm: an Android group (8 resets of a 165 s median, then its turns)
#: spans several updates of about 40 s, so a tighter bound drops the slow platform's groups
ASYNC_STALENESS = 4


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=20000)
    ap.add_argument("--sim-seconds", type=float, default=600.0)
    ap.add_argument("--actors", type=int, default=256, help="real EnvActor Ray actors (0: skip)")
    ap.add_argument("--leases", type=int, default=2000, help="leases measured on the real actors")
    ap.add_argument("--quick", action="store_true", help="2,000 instances, 300 simulated s, 16 actors")
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--async", dest="rl", action="store_true", help="sync against async GRPO at scale instead"
    )
    args = ap.parse_args()
    if args.rl:
        out = rl_at_scale(args.quick)
        print(
            f"{'arm':6} {'trainer GPUs':>12} {'groups/update':>13} {'GPU idle':>9} {'episodes/h':>11} {'staleness':>9}"
        )
        for arm, b in out["best"].items():
            print(
                f"{arm:6} {b['trainer_gpus']:12d} {b['groups_per_update']:13d} {b['gpu_idle_share']:9.3f} "
                f"{b['episodes_per_hour']:11.0f} {b['mean_staleness']:9.2f}"
            )
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        return 0
    if args.quick:
        args.instances, args.sim_seconds = min(args.instances, 2000), min(args.sim_seconds, 300.0)
        args.actors, args.leases = min(args.actors, 16), min(args.leases, 400)

    t0 = time.perf_counter()
    sim = simulate(args.instances, args.sim_seconds)
    r = sim["result"]
    by_platform = {p: bringup(1000, {p: 1.0}) for p in MIX}
    b20k = r.bringup_s if args.instances == 20000 else bringup(20000, MIX)
    real = real_actors(args.actors, args.leases) if args.actors else {}

    platforms = SimBackendConfig().platforms
    out = {
        "instances": r.instances,
        "lease_p50_ms": sim["lease_p50_ms"],
        "lease_p99_ms": sim["lease_p99_ms"],
        "manager_cpu_s_per_1k_leases": sim["manager_cpu_s_per_1k_leases"],
        "bringup_1000_s": by_platform["web"],
        "bringup_20000_s": b20k,
        "shards": r.shards,
        "lost_leases": r.lost_leases,
        "double_leases": r.double_leases,
        "actors_measured": real.get("actors_measured", 0),
        "actor_lease_p99_ms": real.get("actor_lease_p99_ms", 0.0),
        "conditions": {
            "fleet_mix": MIX,
            "bringup_1000_by_platform_s": by_platform,
            "per_host_limits": {
                p: f"{c.instances_per_host} instances, {c.bringups_per_host} bring-ups at once, "
                f"reset median {c.reset_median_s:g} s"
                for p, c in platforms.items()
            },
            "hosts": r.hosts,
            "sim_seconds": r.sim_s,
            "sim_events": r.events,
            "leases": r.leases,
            "shard_killed_and_rebuilt": r.counters.get("shards_rebuilt", 0),
            "deferred_releases": r.counters.get("deferred_releases", 0),
            "request_timeouts": r.counters.get("request_timeouts", 0),
            "recycled": r.counters.get("recycled", 0),
            "failed_resets": r.counters.get("failed_resets", 0),
            "start_failures": r.counters.get("start_failures", 0),
            "sim_wall_s": r.wall_s,
            **{k: v for k, v in real.items() if k not in ("actors_measured", "actor_lease_p99_ms")},
            "wall_s": time.perf_counter() - t0,
        },
    }
    rows = [
        ("instances held (simulated)", f"{out['instances']} in {out['shards']} shards, {r.hosts} hosts"),
        ("lease p50 / p99 (control-plane CPU)", f"{out['lease_p50_ms']:.3f} / {out['lease_p99_ms']:.3f} ms"),
        ("manager CPU per 1k leases", f"{out['manager_cpu_s_per_1k_leases']:.3f} s"),
        ("1,000 fresh browser instances", f"{out['bringup_1000_s']:.0f} s simulated"),
        (
            "1,000 fresh desktop / Android",
            f"{by_platform['desktop']:.0f} / {by_platform['android']:.0f} s simulated",
        ),
        ("20,000 fresh (mixed fleet)", f"{b20k:.0f} s simulated"),
        ("per-host limits", "; ".join(f"{p}: {v}" for p, v in out["conditions"]["per_host_limits"].items())),
        (
            "leases / shard killed and rebuilt",
            f"{r.leases} / {out['conditions']['shard_killed_and_rebuilt']}",
        ),
        ("lost / doubled leases", f"{r.lost_leases} / {r.double_leases}"),
        (
            "real actors: lease p50 / p99",
            f"{real.get('actor_lease_p50_ms', 0):.1f} / {out['actor_lease_p99_ms']:.1f} ms "
            f"over {out['actors_measured']} EnvActors, 16 callers",
        ),
        (
            "real actors: lease p50 / p99, 1 caller",
            f"{real.get('actor_lease_p50_ms_1_caller', 0):.1f} / "
            f"{real.get('actor_lease_p99_ms_1_caller', 0):.1f} ms",
        ),
        ("real actors: manager's own request p95", f"{real.get('manager_request_p95_ms', 0):.2f} ms"),
    ]
    width = max(len(a) for a, _ in rows)
    for a, b in rows:
        print(f"{a:<{width}}  {b}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
