"""Prefix-cache hit rate of window-wise against step-wise history on the real vLLM engine.

    python benchmarks/prefix_cache.py [--quick] [--json out.json]

The same tasks with the same seeds run through window-wise (K=10, O=2) and step-wise (k=5) history, on the
tiny default model served by vLLM (CPU here) and on real web environments. Hit rates come from vLLM's own
counters (prefix_cache_hits / prefix_cache_queries, in tokens), measured as differences around each run.
``window_limit_hit_rate`` is the physical limit: the share of window-wise prompt tokens that an earlier
prompt or response of the same episode already held at the same position (what a perfect cache with no
block granularity would serve). With 2 engines, window-wise runs with sticky routing (every request of an
episode to one engine) and with random routing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path

import ray

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.cluster import init_ray
from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, RayConfig
from maigym_ray.envs.manager import EnvManager
from maigym_ray.harness.history import HistoryConfig, reusable_prefix
from maigym_ray.harness.model_policy import SamplingConfig
from maigym_ray.policy.engine import EngineActor, EngineConfig
from maigym_ray.rollout import rollout_task
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.types import Trajectory


def limit_rate(trajs: list[Trajectory]) -> float:
    """Share of prompt tokens an earlier prompt+response of the same episode held at the same positions."""
    reusable = total = 0
    for t in trajs:
        earlier: list[list[int]] = []
        for u in t.turns:
            reusable += reusable_prefix(list(u.prompt_ids), earlier)
            total += len(u.prompt_ids)
            earlier.append(list(u.prompt_ids) + list(u.response_ids))
    return reusable / total if total else 0.0


async def run(manager, engines, tasks, policy: PolicyConfig, concurrency: int) -> dict:
    before = [await e.prefix_cache_stats.remote() for e in engines]
    for e in engines:
        await e.reset_prefix_cache.remote()
    remote = ray.remote(rollout_task).options(num_cpus=0, max_retries=0)
    queue = list(tasks)
    trajs: list[Trajectory] = []

    async def worker() -> None:
        while queue:
            task = queue.pop(0)
            trajs.append(await remote.remote(manager, task, "web", policy, engines))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - t0
    after = [await e.prefix_cache_stats.remote() for e in engines]
    hits = sum(a["hits"] - b["hits"] for a, b in zip(after, before, strict=True))
    queries = sum(a["queries"] - b["queries"] for a, b in zip(after, before, strict=True))
    steps = sum(len(t.turns) for t in trajs)
    prompt_tokens = sum(len(u.prompt_ids) for t in trajs for u in t.turns)
    gen_tokens = sum(len(u.response_ids) for t in trajs for u in t.turns)
    return {
        "hit_rate": hits / queries if queries else 0.0,
        "hits": hits,
        "queries": queries,
        "steps": steps,
        "steps_per_s": steps / seconds,
        "prompt_tokens_per_s": prompt_tokens / seconds,
        "generated_tokens_per_s": gen_tokens / seconds,
        "seconds": seconds,
        "infra_failed": sum(t.infra_failed for t in trajs),
        "limit_hit_rate": limit_rate(trajs),
        "mean_prompt_tokens": prompt_tokens / max(1, steps),
    }


async def main_async(args: argparse.Namespace) -> dict:
    n_tasks, max_steps = (6, 20) if args.quick else (12, 30)
    tasks = [dataclasses.replace(t, max_steps=max_steps) for t in list(TaskPool.builtin())[:n_tasks]]
    concurrency = 3
    env_cfg = EnvManagerConfig(pools={"web": PoolConfig(target_size=concurrency, max_size=concurrency)})
    manager = (
        ray.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(env_cfg, TaskPool(tasks))
    )
    engine_cfg = EngineConfig(model=args.model, max_model_len=16384, cpu_kv_cache_gb=2)
    env_vars = {"VLLM_CPU_KVCACHE_SPACE": str(engine_cfg.cpu_kv_cache_gb)}
    engines = [
        ray.remote(EngineActor).options(num_cpus=0, runtime_env={"env_vars": env_vars}).remote(engine_cfg, i)
        for i in range(2)
    ]
    await asyncio.gather(manager.start.remote(wait=True), *(e.start.remote() for e in engines))
    # 64 tokens: room for a short thought and the action, the shape of a real agent reply
    sampling = SamplingConfig(temperature=1.0, max_tokens=64, seed=1234)
    base = PolicyConfig(kind="engine", engine=engine_cfg, sampling=sampling)
    window = dataclasses.replace(base, history=HistoryConfig("window", 10, 2))
    step = dataclasses.replace(base, history=HistoryConfig("step", last_k=5))
    res = {
        "window": await run(manager, engines[:1], tasks, window, concurrency),
        "step": await run(manager, engines[:1], tasks, step, concurrency),
        "sticky_2_engines": await run(
            manager, engines, tasks, dataclasses.replace(window, router="sticky"), concurrency
        ),
        "random_2_engines": await run(
            manager, engines, tasks, dataclasses.replace(window, router="random"), concurrency
        ),
    }
    await manager.shutdown.remote()
    for e in engines:
        await e.shutdown.remote()
    w, s = res["window"], res["step"]
    return {
        "window_hit_rate": w["hit_rate"],
        "step_hit_rate": s["hit_rate"],
        "window_steps_per_s": w["steps_per_s"],
        "step_steps_per_s": s["steps_per_s"],
        "window_tokens_per_s": w["prompt_tokens_per_s"],
        "step_tokens_per_s": s["prompt_tokens_per_s"],
        "sticky_hit_rate": res["sticky_2_engines"]["hit_rate"],
        "random_route_hit_rate": res["random_2_engines"]["hit_rate"],
        "window_limit_hit_rate": w["limit_hit_rate"],
        "window_share_of_limit": w["hit_rate"] / w["limit_hit_rate"] if w["limit_hit_rate"] else 0.0,
        "throughput_cost_window": 1 - w["steps_per_s"] / s["steps_per_s"] if s["steps_per_s"] else 0.0,
        "runs": res,
        "quick": args.quick,
        "model": args.model,
        "tasks": n_tasks,
        "max_steps": max_steps,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--model", default="tiny-text")
    args = ap.parse_args()
    init_ray(RayConfig(num_cpus=2))
    out = asyncio.run(main_async(args))
    print(
        f"{'run':18s} {'hit_rate':>9s} {'limit':>7s} {'steps/s':>8s} {'prompt tok/s':>13s} {'mean prompt':>12s}"
    )
    for name, r in out["runs"].items():
        print(
            f"{name:18s} {r['hit_rate']:9.3f} {r['limit_hit_rate']:7.3f} {r['steps_per_s']:8.2f} "
            f"{r['prompt_tokens_per_s']:13.0f} {r['mean_prompt_tokens']:12.0f}"
        )
    print(
        f"window share of limit {out['window_share_of_limit']:.3f}; "
        f"throughput cost of window-wise {out['throughput_cost_window']:+.1%}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
