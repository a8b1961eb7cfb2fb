"""Soak run with a chaos monkey: eval batches for N minutes while env actors, Chromium and engines are killed.

    python benchmarks/soak.py --minutes 10 --chaos-every-s 20 [--quick] [--json PATH]

Batches of episodes run back to back through ``run_rollouts`` (the one rollout path) on the web backend with
Debian's Chromium (the shared per-node browser). Batches alternate between the golden policy and an engine
policy served by scripted engine actors (``maigym_ray.testing.ScriptedEngine``: the real token-in/token-out
path with the tiny model's tokenizer, no vLLM), so engine kills hit live rollouts. Every ``--chaos-every-s``
seconds the monkey SIGKILLs one of: an env actor's process, the shared Chromium, or an engine actor. Dead
engines are replaced between batches, as a driver would.

Figures: ``attempted`` work items, ``completed`` (scored: success or failure), ``infra_failed``,
``task_errors``, ``lost`` (items with no record, or more than one: must be 0), ``kills`` (and by kind),
``rss_slope_mb_per_min`` (memory growth once warm: every process of the tree, this one, Ray, actors, Chromium,
is sampled between batches with the pools back at their size; each process's Theil–Sen RSS slope over the
samples after the first third of the run and after the process's own first minute, summed over processes; ``rss_slope_tree_mb_per_min`` is the slope of
the tree's total, which jumps whenever chaos kills a process or Ray resizes its worker pool), ``fds_start`` /
``fds_end`` (open files of the same process tree after the first two batches, one per policy, and after the
last batch, both once the pools are back to their warm size) and ``minutes``. Falls back to the fake backend when Chromium is missing.
"""

# ruff: noqa: I001  (import order is deliberate: maigym_ray before ray, see below)
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import maigym_ray  # noqa: F401  (sets the loopback Ray environment: it must come before ray)

import psutil
import ray

from maigym_ray.runtime.ray_init import init_ray
from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, RayConfig, WebBackendConfig
from maigym_ray.envs.manager import EnvManager
from maigym_ray.testing.drills import ROLLOUT_TASK
from maigym_ray.rollout import outcome_counts, run_rollouts
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.testing import ScriptedEngine, fake_task
from maigym_ray.testing.drills import fake_manager_config, lost, scripted_policy, scripted_replies

WEB_TASKS = ["train-book-earliest", "food-two-margherita", "calendar-move-sync", "contacts-delete-plumber"]


def tree(pid: int) -> list[psutil.Process]:
    """A process and all its descendants."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def tree_rss_mb(pid: int) -> float:
    """RSS of the process tree in MB."""
    total = 0
    for p in tree(pid):
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def tree_fds(pid: int) -> int:
    total = 0
    for p in tree(pid):
        try:
            total += p.num_fds()
        except psutil.Error:
            pass
    return total


def kind(p: psutil.Process) -> str:
    """A short name of what a process is (Ray actor or task name, Chromium process type, ...)."""
    try:
        cmd = p.cmdline()
        title = p.name()
    except psutil.Error:
        return "gone"
    if cmd and cmd[0].startswith("ray::"):
        return cmd[0].split()[0]
    if cmd and "chrom" in Path(cmd[0]).name:
        return "chromium " + next((a.split("=", 1)[1] for a in cmd if a.startswith("--type=")), "browser")
    return Path(cmd[0]).name if cmd else title


def breakdown(pid: int) -> dict[str, list[float]]:
    """``{kind: [processes, RSS MB, open files]}`` over a process tree."""
    out: dict[str, list[float]] = {}
    for p in tree(pid):
        try:
            row = out.setdefault(kind(p), [0, 0.0, 0])
            row[1] += round(p.memory_info().rss / 2**20, 1)
            row[2] += p.num_fds()
            row[0] += 1
        except psutil.Error:
            pass
    return out


def slope_per_min(samples: list[tuple[float, float]]) -> float:
    """Theil–Sen slope of (seconds, MB) samples, in MB per minute: the median of pairwise slopes, so a few
    samples caught while a killed process's replacement was starting do not swing it."""
    pairs = [
        (y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(samples) for x2, y2 in samples[i + 1 :] if x2 > x1
    ]
    return 60.0 * statistics.median(pairs) if pairs else 0.0


class Chaos:
    """Kills one thing at random every ``every_s`` seconds while the soak runs."""

    def __init__(self, manager: Any, engines: list[Any], every_s: float, seed: int, web: bool) -> None:
        self.manager, self.engines, self.every_s = manager, engines, every_s
        self.rng = random.Random(seed)
        self.kinds = ["env_actor", "engine"] + (["chromium"] if web else [])
        self.kills: dict[str, int] = dict.fromkeys(self.kinds, 0)

    async def _kill_one(self) -> str:
        kind = self.rng.choice(self.kinds)
        if kind == "env_actor":
            insts = [i for i in await self.manager.instances.remote() if i["pid"] and i["state"] != "broken"]
            busy = [i for i in insts if i["leased"]] or insts
            if busy:
                os.kill(self.rng.choice(busy)["pid"], signal.SIGKILL)
                return kind
        elif kind == "chromium":
            pid = (await self.manager.service_pids.remote()).get("browser", 0)
            if pid:
                os.kill(pid, signal.SIGKILL)
                return kind
        elif self.engines:
            ray.kill(self.rng.choice(self.engines), no_restart=True)
            return kind
        return ""

    async def run(self, until: float) -> None:
        while time.monotonic() + self.every_s < until:
            await asyncio.sleep(self.every_s)
            try:
                kind = await self._kill_one()
            except (ProcessLookupError, psutil.Error):
                kind = ""  # it died on its own meanwhile
            if kind:
                self.kills[kind] += 1


async def alive(engine: Any) -> bool:
    try:
        await asyncio.wait_for(engine.start.remote(), 5)
        return True
    except Exception:
        return False


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    web = shutil.which("chromium") is not None and args.backend == "web"
    # Ray's GCS keeps the events of the last N tasks (default 100 000); every episode is a Ray task, so at a few
    # episodes a second the head grows by ~13 MB/min for hours until that cap (measured: gcs_server +128 MB in
    # a 10-minute soak). A long-running job bounds it; the soak does too, so what it measures is our growth.
    os.environ.setdefault("RAY_task_events_max_num_task_in_gcs", str(args.gcs_task_events))
    init_ray(RayConfig(num_cpus=2, object_store_mb=256))
    if web:
        pool = TaskPool.builtin()
        tasks = [pool.get(t) for t in WEB_TASKS]
        cfg = EnvManagerConfig(
            pools={
                "web": PoolConfig(
                    target_size=args.concurrency,
                    max_size=args.concurrency,  # a fixed pool: samples compare like with like
                    recycle_after=20,
                    web=WebBackendConfig(browser="shared"),
                )
            },
            health_interval_s=1.0,
            reset_timeout_s=20.0,
            step_timeout_s=10.0,
        )
    else:
        pool = TaskPool([fake_task(f"fake-{i}") for i in range(4)])
        tasks = list(pool)
        cfg = fake_manager_config(delay_s=0.05)
    manager = ray.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg, pool)
    t_up = time.perf_counter()
    await manager.start.remote(wait=True)
    replies = scripted_replies()

    def new_engine(i: int) -> Any:
        return ray.remote(ScriptedEngine).options(num_cpus=0).remote(replies, i, delay_s=0.05)

    engines = [new_engine(i) for i in range(2)]
    await asyncio.gather(*(e.start.remote() for e in engines))
    bringup_s = time.perf_counter() - t_up
    me = os.getpid()
    t0 = time.monotonic()
    until = t0 + args.minutes * 60
    chaos = Chaos(manager, engines, args.chaos_every_s, args.seed, web)
    monkey = asyncio.ensure_future(chaos.run(until))
    # RSS and open files are sampled between batches, when no episode holds a lease: mid-batch figures swing
    # by hundreds of MB with the number of live Chromium contexts and rollout workers, which is load, not a
    # leak. The start figures are taken after one batch of each policy (rollout workers and engines warm).
    rss_all: list[tuple[float, float]] = []
    per_pid: dict[int, list[tuple[float, float]]] = {}
    born: dict[int, float] = {}  # a process's start, in seconds since t0
    kinds: dict[int, str] = {}
    wall0 = time.time() - (time.monotonic() - t0)
    totals = dict.fromkeys(("success", "failure", "task_error", "infra_failed"), 0)
    attempted = lost_items = batches = 0
    fds_start, start_breakdown = 0, {}
    policies = [PolicyConfig(kind="golden"), scripted_policy(generate_timeout_s=10.0)]
    while time.monotonic() < until - 5:
        for i, e in enumerate(engines):  # a driver replaces dead engines between batches
            if not await alive(e):
                engines[i] = new_engine(i)
        chaos.engines = engines
        policy = policies[batches % 2]
        work = [
            (f"b{batches}-{j}", tasks[j % len(tasks)], tasks[j % len(tasks)].platforms[0])
            for j in range(args.batch)
        ]
        done = await run_rollouts(
            manager,
            work,
            policy,
            engines if policy.kind == "engine" else None,
            args.concurrency,
            infra_retries=2,
            step_timeout_s=10.0,
            episode_timeout_s=120.0,
            task_options=ROLLOUT_TASK,
        )
        attempted += len(work)
        lost_items += lost(work, done)
        for k, v in outcome_counts(done).items():
            totals[k] += v
        batches += 1
        await manager.wait_ready.remote(60)  # killed instances replaced: the same processes at every sample
        await asyncio.sleep(0.5)  # replaced Chromium contexts' renderers exit
        now = time.monotonic() - t0
        rss_all.append((now, tree_rss_mb(me)))
        for proc in tree(me):
            try:
                if proc.pid not in born:
                    born[proc.pid], kinds[proc.pid] = proc.create_time() - wall0, kind(proc)
                per_pid.setdefault(proc.pid, []).append((now, proc.memory_info().rss / 2**20))
            except psutil.Error:
                pass
        if batches == 2:
            fds_start, start_breakdown = tree_fds(me), breakdown(me)
        print(
            f"[{(time.monotonic() - t0) / 60:5.1f} min] batch {batches}: {outcome_counts(done)} "
            f"kills={sum(chaos.kills.values())} rss={rss_all[-1][1]:.0f}MB fds={tree_fds(me)}",
            flush=True,
        )
    monkey.cancel()
    minutes = (time.monotonic() - t0) / 60
    await manager.wait_ready.remote(60)  # pools back to their warm size before counting files
    await asyncio.sleep(2.0)
    fds_end, end_breakdown = tree_fds(me), breakdown(me)
    warm_from = minutes * 60 / 3
    warm_all = [s for s in rss_all if s[0] >= warm_from]
    # Growth of the processes themselves: the sum over processes of each one's slope while it lived (three or
    # more warm samples). Chaos kills and restarts processes and Ray varies its worker pool, so the tree's total
    # jumps by a process's size at every change; a leak is a process that keeps growing, which this sees.
    # "Once warm" holds per process too: a process that chaos started late (a new Chromium, env actor or
    # engine) fills its caches over its first minute, which is warm-up, not a leak.
    settle = min(60.0, warm_from)
    slopes = {
        pid: [x for x in xs if x[0] >= max(warm_from, born[pid] + settle)] for pid, xs in per_pid.items()
    }
    growth_by_kind: dict[str, float] = {}
    for pid, xs in slopes.items():
        # a process seen for under a minute once warm has no trend to speak of: a few seconds' jitter would
        # read as hundreds of MB per minute
        if len(xs) >= 3 and xs[-1][0] - xs[0][0] >= min(60.0, warm_from):
            growth_by_kind[kinds[pid]] = growth_by_kind.get(kinds[pid], 0.0) + slope_per_min(xs)
    growth = sum(growth_by_kind.values())
    metrics = await manager.metrics.remote()
    await manager.shutdown.remote()
    ray.kill(manager)
    for e in engines:
        ray.kill(e)
    return {
        "backend": "web" if web else "fake",
        "minutes": round(minutes, 2),
        "chaos_every_s": args.chaos_every_s,
        "gcs_task_events": int(os.environ["RAY_task_events_max_num_task_in_gcs"]),
        "batches": batches,
        "attempted": attempted,
        "completed": totals["success"] + totals["failure"],
        "success": totals["success"],
        "failure": totals["failure"],
        "infra_failed": totals["infra_failed"],
        "task_errors": totals["task_error"],
        "lost": lost_items,
        "kills": sum(chaos.kills.values()),
        "kills_by_kind": chaos.kills,
        "rss_slope_mb_per_min": round(growth, 2),
        "rss_slope_tree_mb_per_min": round(slope_per_min(warm_all), 2),
        "rss_slope_by_kind": {k: round(v, 2) for k, v in sorted(growth_by_kind.items())},
        "rss_mb_start": round(rss_all[0][1], 1) if rss_all else 0.0,
        "rss_mb_end": round(rss_all[-1][1], 1) if rss_all else 0.0,
        "fds_start": fds_start,
        "fds_end": fds_end,
        "processes_start": start_breakdown,
        "processes_end": end_breakdown,
        "bringup_s": round(bringup_s, 1),
        "env_counters": metrics["counters"],
    }


def table(r: dict[str, Any]) -> str:
    rows = [
        ("backend", r["backend"]),
        ("minutes", r["minutes"]),
        ("attempted", r["attempted"]),
        ("completed (scored)", r["completed"]),
        ("infra_failed", r["infra_failed"]),
        ("task_errors", r["task_errors"]),
        ("lost (must be 0)", r["lost"]),
        ("kills", f"{r['kills']} {r['kills_by_kind']}"),
        ("rss slope, warm (MB/min, <= 5)", r["rss_slope_mb_per_min"]),
        ("open files start -> end (<= +10 %)", f"{r['fds_start']} -> {r['fds_end']}"),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--chaos-every-s", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true", help="1.5 minutes, a kill every 10 s")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--backend", choices=("web", "fake"), default="web")
    ap.add_argument("--concurrency", type=int, default=3)
    ap.add_argument("--batch", type=int, default=12, help="episodes per batch")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--gcs-task-events",
        type=int,
        default=2000,
        help="task events Ray's GCS keeps (Ray's default: 100000)",
    )
    args = ap.parse_args()
    if args.quick:
        args.minutes, args.chaos_every_s = 1.5, 10.0
    result = asyncio.run(soak(args))
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    sys.exit(0 if result["lost"] == 0 else 1)


if __name__ == "__main__":
    main()
