"""Prefix-cache hit rate of window-wise against step-wise history on the real vLLM engine.

    python benchmarks/prefix_cache.py [--quick] [--workloads screenshot,a11y] [--json out.json]

The same tasks with the same seeds run through window-wise (K=10, O=2) and step-wise (k=5) history, on the
tiny default models served by vLLM (CPU here) and on real web environments, for two workloads:

- ``screenshot``: each observation turn is the screenshot (tiny-vl, 67 engine tokens an image). This is the
  reference's setting, whose baseline is "the last k screenshots"; its figures are the top-level ones.
- ``a11y``: each observation turn is the accessibility text (tiny-text), this project's text default. Its
  turns are about 250 tokens against a 64-token reply, so a larger share of every prompt is new.

Hit rates come from vLLM's own counters (prefix_cache_hits / prefix_cache_queries, in tokens), measured as
differences around each run. ``window_limit_hit_rate`` is the physical limit: the share of window-wise prompt
tokens (images counted as the tokens vLLM expands them to) that an earlier prompt or response of the same
episode already held at the same position (what a perfect cache with no block granularity would serve). With 2
engines, window-wise runs with sticky routing (every request of an episode to one engine) and with random
routing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path

import maigym_ray  # noqa: F401  (loopback Ray settings: must run before ray is imported)

# isort: split

import ray

from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, RayConfig
from maigym_ray.envs.manager import EnvManager
from maigym_ray.generation import SamplingConfig
from maigym_ray.harness.history import HistoryConfig, reusable_prefix
from maigym_ray.harness.prompt import PromptConfig
from maigym_ray.policy.engine import EngineActor, EngineConfig
from maigym_ray.rollout import rollout_task
from maigym_ray.runtime.ray_init import init_ray
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.types import Trajectory


def engine_len(ids: list[int], image_id: int = -1, image_tokens: int = 1) -> int:
    """Length in the engine's tokens: an image placeholder ``image_id`` expands to ``image_tokens``."""
    return len(ids) + (image_tokens - 1) * ids.count(image_id)


def limit_rate(trajs: list[Trajectory], image_id: int = -1, image_tokens: int = 1) -> float:
    """Share of prompt tokens an earlier prompt+response of the same episode held at the same positions.

    Counted in the engine's tokens: an image placeholder id (``image_id``) stands for the ``image_tokens``
    tokens vLLM expands it to. Within one episode a placeholder at the same position is the same screenshot,
    because the observation turns before it match too."""

    reusable = total = 0
    for t in trajs:
        earlier: list[list[int]] = []
        for u in t.turns:
            prompt = list(u.prompt_ids)
            reusable += engine_len(prompt[: reusable_prefix(prompt, earlier)], image_id, image_tokens)
            total += engine_len(prompt, image_id, image_tokens)
            earlier.append(prompt + list(u.response_ids))
    return reusable / total if total else 0.0


def image_expansion(model: str) -> tuple[int, int]:
    """(placeholder id, tokens vLLM expands one image to) for a vision-language model; (-1, 1) for text."""
    from transformers import AutoProcessor, AutoTokenizer

    from maigym_ray.policy.engine import resolve_model

    path = resolve_model(model)
    tok = AutoTokenizer.from_pretrained(path)
    if "<image>" not in tok.get_vocab():
        return -1, 1
    from PIL import Image

    proc = AutoProcessor.from_pretrained(path)
    ids = proc(text="<image>", images=[Image.new("RGB", (448, 448))])["input_ids"][0]
    return tok.convert_tokens_to_ids("<image>"), len(ids)


async def run(
    manager, engines, tasks, policy: PolicyConfig, concurrency: int, image: tuple[int, int] = (-1, 1)
) -> dict:
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
    prompt_tokens = sum(engine_len(list(u.prompt_ids), *image) for t in trajs for u in t.turns)
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
        "limit_hit_rate": limit_rate(trajs, *image),
        "mean_prompt_tokens": prompt_tokens / max(1, steps),
    }


#: name -> (model, observation content). "screenshot" is the reference's setting (history of screenshots, the
#: "last k screenshots" baseline); "a11y" is this project's text default (accessibility text, text model).
WORKLOADS = {"screenshot": ("tiny-vl", "screenshot"), "a11y": ("tiny-text", "a11y")}


async def measure(manager, tasks, model: str, observation: str, concurrency: int) -> dict:
    """The four runs (window, step, 2 engines sticky, 2 engines random) of one workload, and its figures."""
    engine_cfg = EngineConfig(model=model, max_model_len=16384, cpu_kv_cache_gb=2)
    env_vars = engine_cfg.process_env()
    engines = [
        ray.remote(EngineActor).options(num_cpus=0, runtime_env={"env_vars": env_vars}).remote(engine_cfg, i)
        for i in range(2)
    ]
    await asyncio.gather(*(e.start.remote() for e in engines))
    image = image_expansion(model)
    # 64 tokens: room for a short thought and the action, the shape of a real agent reply
    sampling = SamplingConfig(temperature=1.0, max_tokens=64, seed=1234)
    prompt = PromptConfig(observation=observation)
    base = PolicyConfig(kind="engine", engine=engine_cfg, sampling=sampling, prompt=prompt)
    window = dataclasses.replace(base, history=HistoryConfig("window", 10, 2))
    step = dataclasses.replace(base, history=HistoryConfig("step", last_k=5))
    runs = {
        "window": (engines[:1], window),
        "step": (engines[:1], step),
        "sticky_2_engines": (engines, dataclasses.replace(window, router="sticky")),
        "random_2_engines": (engines, dataclasses.replace(window, router="random")),
    }
    res = {}
    for i, (name, (engs, policy)) in enumerate(runs.items()):
        print(f"[prefix_cache] {model}/{observation}: run {i + 1}/{len(runs)} {name}", flush=True)
        res[name] = await run(manager, engs, tasks, policy, concurrency, image)
    for e in engines:
        await e.shutdown.remote()
        ray.kill(e)
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
        "model": model,
        "observation": observation,
        "runs": res,
    }


async def main_async(args: argparse.Namespace) -> dict:
    # --quick runs fewer tasks, not shorter episodes: the hit rate depends on episode length (each window pays
    # its overlap once), so the quick figures estimate the full run's.
    n_tasks, max_steps = (3, 30) if args.quick else (12, 30)
    web_tasks = [t for t in TaskPool.builtin() if "web" in t.platforms]
    tasks = [dataclasses.replace(t, max_steps=max_steps) for t in web_tasks[:n_tasks]]
    concurrency = 3
    env_cfg = EnvManagerConfig(pools={"web": PoolConfig(target_size=concurrency, max_size=concurrency)})
    manager = (
        ray.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(env_cfg, TaskPool(tasks))
    )
    await manager.start.remote(wait=True)
    names = args.workloads.split(",")
    workloads = {name: await measure(manager, tasks, *WORKLOADS[name], concurrency) for name in names}
    await manager.shutdown.remote()
    # The top-level figures are the first workload's (the reference's screenshot history by default).
    return {
        **{k: v for k, v in workloads[names[0]].items() if k != "runs"},
        "workload": names[0],
        "workloads": workloads,
        "quick": args.quick,
        "tasks": n_tasks,
        "max_steps": max_steps,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--workloads",
        default="screenshot,a11y",
        help=f"comma list of {sorted(WORKLOADS)}; the first is top-level",
    )
    args = ap.parse_args()
    init_ray(RayConfig(num_cpus=2))
    out = asyncio.run(main_async(args))
    print(
        f"{'workload':11s} {'run':17s} {'hit_rate':>9s} {'limit':>7s} {'steps/s':>8s} {'prompt tok/s':>13s} "
        f"{'mean prompt':>12s}"
    )
    for wname, wl in out["workloads"].items():
        for name, r in wl["runs"].items():
            print(
                f"{wname:11s} {name:17s} {r['hit_rate']:9.3f} {r['limit_hit_rate']:7.3f} {r['steps_per_s']:8.2f} "
                f"{r['prompt_tokens_per_s']:13.0f} {r['mean_prompt_tokens']:12.0f}"
            )
        print(
            f"{wname}: window share of limit {wl['window_share_of_limit']:.3f}; "
            f"throughput cost of window-wise {wl['throughput_cost_window']:+.1%}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
