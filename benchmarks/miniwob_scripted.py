"""Success of the scripted MiniWoB++ solutions through the EnvManager and run_episode, per task.

    python benchmarks/miniwob_scripted.py [--seeds 20] [--instances 2] [--tasks a,b] [--quick] [--json out.json]

Every task with a solver in ``maigym_ray.suites.miniwob_solutions.SOLVERS`` runs on seeds 1000..1000+N-1
(the CI test uses the first 5 of them), each as one episode on a leased instance of a ``miniwob`` pool with
the node's shared Chromium. The reward is the page's (``page_reward``). Prints a table of per-task success
and writes ``success_by_task``, ``tasks_at_95``, ``episodes``, ``seconds`` and ``episodes_per_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import maigym_ray  # noqa: F401  (loopback Ray settings: must run before ray is imported)

# isort: split

import ray

from maigym_ray.config import RayConfig
from maigym_ray.envs.lease import LeasedEnv
from maigym_ray.envs.manager import EnvManager
from maigym_ray.harness.episode import run_episode
from maigym_ray.runtime.placement import Placement
from maigym_ray.runtime.ray_init import init_ray
from maigym_ray.runtime.topology import TopologyConfig
from maigym_ray.suites.miniwob import manager_config, miniwob_task
from maigym_ray.suites.miniwob_solutions import SOLVERS, MiniwobScriptedPolicy


async def run(names: list[str], seeds: int, instances: int) -> dict:
    cfg = manager_config(instances, screenshot=False)
    manager = ray.remote(EnvManager).options(**Placement(TopologyConfig()).env_manager()).remote(cfg)
    await manager.start.remote(wait=True)
    queue = [miniwob_task(n, 1000 + s) for n in names for s in range(seeds)]
    policy = MiniwobScriptedPolicy()
    wins: dict[str, list[bool]] = {n: [] for n in names}
    infra = 0
    total, every = len(queue), max(1, len(queue) // 20)

    async def worker() -> None:
        nonlocal infra
        env = await LeasedEnv.acquire(manager, "web")
        try:
            while queue:
                task = queue.pop(0)
                traj = await run_episode(env, task, policy)
                infra += traj.infra_failed
                wins[task.initial_state["miniwob"]["task"]].append(traj.reward.success)
                done = sum(map(len, wins.values()))
                if done % every == 0 or done == total:  # about 20 progress lines in all
                    rate = done / (time.perf_counter() - t0)
                    print(f"[miniwob] {done}/{total} episodes ({rate:.2f}/s)", file=sys.stderr, flush=True)
        finally:
            await env.release()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(instances)))
    seconds = time.perf_counter() - t0
    await manager.shutdown.remote()
    rates = {n: sum(w) / len(w) for n, w in wins.items()}
    episodes = sum(len(w) for w in wins.values())
    return {
        "seeds": seeds,
        "instances": instances,
        "success_by_task": rates,
        "tasks_at_95": sum(r >= 0.95 for r in rates.values()),
        "tasks": len(names),
        "episodes": episodes,
        "infra_failed": infra,
        "seconds": round(seconds, 2),
        "episodes_per_s": round(episodes / seconds, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: every solved task)")
    ap.add_argument("--quick", action="store_true", help="5 seeds")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    names = [n for n in args.tasks.split(",") if n] or sorted(SOLVERS)
    init_ray(RayConfig(num_cpus=2, object_store_mb=256))
    try:
        out = asyncio.run(run(names, 5 if args.quick else args.seeds, args.instances))
    finally:
        ray.shutdown()
    print(f"{'task':30s} success ({out['seeds']} seeds)")
    for n, r in out["success_by_task"].items():
        print(f"{n:30s} {r:6.0%}")
    print(
        f"{out['tasks_at_95']}/{out['tasks']} tasks at >= 95 %; {out['episodes']} episodes in {out['seconds']} s "
        f"({out['episodes_per_s']}/s), infra failures {out['infra_failed']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
