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
``fds_start`` / ``fds_end`` (open files of the whole process tree after the first two batches, one per policy,
and after the last one), ``minutes``, and ``rss_slope_mb_per_min``.

The memory figure. After every batch, once the pools and engines are back at their size and the set of
processes has been still for 1.5 s (the chaos monkey waits meanwhile), the soak sums the RSS of every process
of its tree: this driver, Ray's daemons and workers, the actors, Chromium and the Playwright driver.
``rss_slope_mb_per_min`` is the least-squares slope of that sum over the samples after a warm-up window
(``--warmup-min``; by default the first three minutes, or half of a shorter run), in MB per minute, fit with
one intercept per policy of the batch just run (the tree sits a steady ~30 MB apart after a golden and after
an engine batch), that is the common slope of the two series; ``rss_slope_stderr`` is its standard error.
Every sample in the window counts, including the processes that chaos killed and their replacements (a
fresh process is smaller until it warms: a sawtooth that the fit averages); every change of the process set
inside the window is listed in ``process_changes_warm`` and counted in ``processes_started_warm``.
Diagnostics of the same samples, not the target: ``rss_slope_by_kind`` (the fit on each kind of process's
total), ``rss_anon_slope_mb_per_min`` (anonymous RSS: heaps, without code and shared pages) and
``rss_slope_lived_through_mb_per_min`` (only the processes present in every sample of the window).

Settings the soak makes before Ray starts, each explained where it is set and reported under ``settings``:
bounds on three of Ray's caches that a long job reaches anyway, Ray's idle-worker limit, two malloc arenas per
process and Ray's metrics pipeline off. The rollout worker pool is started at its full size, and each worker
runs one episode of each policy, before the clock starts (``prestarted_workers``). ``--tracemalloc`` adds,
for diagnosis, the top Python allocation growth of the EnvManager and NodeServices over the window.
Falls back to the fake backend when Chromium is missing.
"""

# ruff: noqa: I001  (import order is deliberate: maigym_ray before ray, see below)
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import maigym_ray  # noqa: F401  (sets the loopback Ray environment: it must come before ray)

import psutil
import ray

from maigym_ray.runtime.ray_init import init_ray
from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, RayConfig
from maigym_ray.envs.manager import EnvManager, remote_class
from maigym_ray.testing.drills import ROLLOUT_TASK
from maigym_ray.rollout import outcome_counts, rollout_task, run_rollouts
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.testing import ScriptedEngine, fake_task
from maigym_ray.testing.drills import fake_manager_config, lost, scripted_policy, scripted_replies

#: Ray and process settings the soak sets (unless already set), reported in its JSON.
SETTINGS = (
    "RAY_task_events_max_num_task_in_gcs",
    "RAY_num_workers_soft_limit",
    "RAY_task_events_max_dropped_task_attempts_tracked_per_job_in_gcs",
    "RAY_LOG_MONITOR_MAX_OPEN_FILES",
    "MALLOC_ARENA_MAX",
    "RAY_enable_metrics_collection",
)

WEB_TASKS = ["train-book-earliest", "food-two-margherita", "calendar-move-sync", "contacts-delete-plumber"]


def tree(pid: int) -> list[psutil.Process]:
    """A process and all its descendants."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def kind(p: psutil.Process) -> str:
    """A short name of what a process is (Ray actor or task name, Chromium process type, ...)."""
    try:
        cmd = p.cmdline()
        title = p.name()
    except psutil.Error:
        return "gone"
    if cmd and cmd[0].startswith("ray::"):  # "ray::EnvActor.health" while it runs a method: the actor's kind
        return cmd[0].split()[0].split(".")[0]
    if cmd and Path(cmd[0]).name.startswith("python") and len(cmd) > 1:  # Ray's helpers: name the script
        script = next(
            (a for a in cmd[1:] if a.endswith(".py")), cmd[1] if cmd[1] != "-m" else " ".join(cmd[1:3])
        )
        return "python " + Path(script).name
    if cmd and "chrom" in Path(cmd[0]).name:
        return "chromium " + next((a.split("=", 1)[1] for a in cmd if a.startswith("--type=")), "browser")
    return Path(cmd[0]).name if cmd else title


def processes(pid: int) -> list[list[Any]]:
    """``[pid, kind, RSS MB, anonymous RSS MB, open files, start time]`` of every process of a tree. Anonymous
    RSS is RSS less its file-backed and shared pages (code paged in as it first runs, shared memory): the part
    of a process's growth that is its own heap."""
    out: list[list[Any]] = []
    for p in tree(pid):
        try:
            mem, fds, k, born = p.memory_info(), p.num_fds(), kind(p), p.create_time()
        except psutil.Error:
            continue
        rss, shared = mem.rss / 2**20, getattr(mem, "shared", 0) / 2**20
        out.append([p.pid, k, round(rss, 1), round(rss - shared, 1), fds, born])
    return out


def breakdown(procs: list[list[Any]]) -> dict[str, list[float]]:
    """``{kind: [processes, RSS MB, open files]}`` of :func:`processes`' rows."""
    out: dict[str, list[float]] = {}
    for _, k, rss, _, fds, _ in procs:
        row = out.setdefault(k, [0, 0.0, 0])
        row[0] += 1
        row[1] = round(row[1] + rss, 1)
        row[2] += fds
    return out


async def settle_tree(pid: int, quiet_s: float = 1.5, limit_s: float = 8.0) -> list[list[Any]]:
    """The tree's :func:`processes` once its set of processes has not changed for ``quiet_s`` (at most ``limit_s``).

    Between batches Ray ends the rollout workers it started beyond its idle pool (about a second after they go
    idle) and Chromium ends the renderers of closed contexts; a sample taken before that counts them, so
    samples would differ by whole processes (~100 MB each) at random."""
    deadline = time.monotonic() + limit_s
    pids = {p.pid for p in tree(pid)}
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_s:
        await asyncio.sleep(0.25)
        now = {p.pid for p in tree(pid)}
        if now != pids:
            pids, quiet_since = now, time.monotonic()
    return processes(pid)


def warmup_s(run_s: float) -> float:
    """The warm-up window left out of the slope: the first three minutes (half of a shorter run). Over it the processes fill their caches (imports, Chromium's code and font caches, V8 heaps, Ray's
    worker pool, the GCS's bounded task-event table): growth that stops, not a leak."""
    return min(180.0, run_s / 2)


def slope_per_min(points: list[tuple[float, float]], groups: list[Any] | None = None) -> tuple[float, float]:
    """Least-squares slope of (seconds, MB) points in MB per minute, and its standard error, with one intercept
    per group (``groups[i]`` is point i's): the common slope of the groups. Samples after a golden batch and
    after an engine batch sit a steady ~30 MB apart (the pages and workers each policy leaves warm), an offset
    that is not growth. (0, 0) with fewer than three points."""
    groups = groups or [0] * len(points)
    by: dict[Any, list[tuple[float, float]]] = {}
    for pt, g in zip(points, groups, strict=True):
        by.setdefault(g, []).append(pt)
    centred = []
    for pts in by.values():
        mx, my = statistics.fmean(x for x, _ in pts), statistics.fmean(y for _, y in pts)
        centred += [(x - mx, y - my) for x, y in pts]
    sxx = sum(x * x for x, _ in centred)
    if len(points) < 3 or not sxx:
        return 0.0, 0.0
    b = sum(x * y for x, y in centred) / sxx
    dof = max(1, len(points) - len(by) - 1)
    se = (sum((y - b * x) ** 2 for x, y in centred) / dof / sxx) ** 0.5
    return 60.0 * b, 60.0 * se


def process_changes(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Between consecutive samples: the processes that started and ended, and those that changed kind (Ray
    hands an idle worker to a new actor), each by kind; one entry per sample where the set changed."""
    out: list[dict[str, Any]] = []
    for a, b in itertools.pairwise(samples):
        ka = {r[0]: r[1] for r in a["procs"]}
        kb = {r[0]: r[1] for r in b["procs"]}
        started = Counter(kb[p] for p in kb.keys() - ka.keys())
        ended = Counter(ka[p] for p in ka.keys() - kb.keys())
        became = Counter(f"{ka[p]} -> {kb[p]}" for p in ka.keys() & kb.keys() if ka[p] != kb[p])
        if started or ended or became:
            out.append({"t": round(b["t"], 1), "started": started, "ended": ended, "became": became})
    return out


def lived_through(samples: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(seconds, MB): the summed RSS, at each sample, of the processes present at every one of them."""
    if not samples:
        return []
    keep = set.intersection(*({r[0] for r in x["procs"]} for x in samples))
    return [(x["t"], sum(r[2] for r in x["procs"] if r[0] in keep)) for x in samples]


class Chaos:
    """Kills one thing at random every ``every_s`` seconds while the soak runs."""

    def __init__(self, manager: Any, engines: list[Any], every_s: float, seed: int, web: bool) -> None:
        self.manager, self.engines, self.every_s = manager, engines, every_s
        self.rng = random.Random(seed)
        self.kinds = ["env_actor", "engine"] + (["chromium"] if web else [])
        self.kills: dict[str, int] = dict.fromkeys(self.kinds, 0)
        #: held while the soak samples memory, so that every sample sees the whole set of processes (a kill
        #: inside the sample would count a 100-300 MB process as missing)
        self.quiet = asyncio.Lock()

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
                async with self.quiet:  # not while a memory sample is being taken (it waits a few seconds)
                    kind = await self._kill_one()
            except (ProcessLookupError, psutil.Error):
                kind = ""  # it died on its own meanwhile
            if kind:
                self.kills[kind] += 1


def _warm_worker(until: float, episodes: list[tuple[Any, ...]]) -> int:
    time.sleep(max(0.0, until - time.time()))  # wall clock: every task holds its worker until all have one
    for args in episodes:  # what a rollout worker builds on its first episodes: imports, tokenizer, handles
        rollout_task(*args)
    return os.getpid()


async def prestart_workers(n: int, episodes: list[tuple[Any, ...]]) -> int:
    """Has Ray start ``n`` rollout workers now and warms each with ``episodes`` (one of each policy), so that the
    worker pool is at its full size and warm before the measurement starts. Left to itself Ray starts a worker
    whenever demand briefly exceeds its idle ones, sometimes minutes into the run (a ~150 MB step in the
    slope's window), and an idle worker that first runs a rollout late in the run grows ~18 MB as it imports
    the rollout path and loads the tokenizer. Returns how many distinct worker processes ran them."""
    remote = ray.remote(_warm_worker).options(**ROLLOUT_TASK)
    until = time.time() + 4.0 * n  # Ray starts workers a few at a time: every task waits for the last one
    return len(set(await asyncio.gather(*(remote.remote(until, episodes) for _ in range(n)))))


def _tracemalloc_start(actor: Any) -> None:
    import gc
    import tracemalloc

    tracemalloc.start()
    gc.collect()
    actor._soak_tracemalloc = tracemalloc.take_snapshot()


def _tracemalloc_growth(actor: Any) -> list[str]:
    import gc
    import tracemalloc

    gc.collect()
    stats = tracemalloc.take_snapshot().compare_to(actor._soak_tracemalloc, "lineno")
    return [str(s) for s in stats[:12]]


async def tracemalloc_actors(manager: Any, fn: Any) -> dict[str, Any]:
    """Runs ``fn(actor)`` in the EnvManager and every NodeServices actor (``--tracemalloc``, a diagnosis)."""
    actors = {
        "EnvManager": manager,
        **{f"NodeServices {n[:8]}": h for n, h in (await manager.node_services.remote()).items()},
    }
    outs = await asyncio.gather(*(a.__ray_call__.remote(fn) for a in actors.values()), return_exceptions=True)
    return {
        k: (v if not isinstance(v, BaseException) else repr(v)) for k, v in zip(actors, outs, strict=True)
    }


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
    # Ray keeps as many idle workers as CPUs (2 here) and ends the others a second after they go idle, so with
    # more rollout tasks in flight than that it starts and ends a worker process every batch (~1 s of CPU and
    # two log files each, which Ray's log monitor holds open, up to 200). A long-running job keeps its rollout
    # workers; the soak does too, so its process set and open files are the same between batches.
    os.environ.setdefault("RAY_num_workers_soft_limit", str(args.concurrency + 4))
    # Two more of Ray's bounded caches, set to what a long-running job would use: the IDs of task events the GCS
    # dropped past its cap (kept per job, up to a million), and the log files its log monitor holds open (every
    # started worker's, up to 200, then it closes them all): with a kill every few seconds the soak would spend
    # its whole run filling them, which is Ray's bookkeeping reaching its bound, not growth.
    os.environ.setdefault("RAY_task_events_max_dropped_task_attempts_tracked_per_job_in_gcs", "1000")
    os.environ.setdefault("RAY_LOG_MONITOR_MAX_OPEN_FILES", "64")
    # glibc gives every thread that allocates its own malloc arena (up to 8 per core), and a Ray worker runs a
    # dozen threads (gRPC, the core worker's io loops, asyncio): freed memory stays spread over arenas that are
    # rarely returned, so each process's RSS creeps up by fragmentation. Two arenas bound that; every process of
    # the tree (Ray's daemons, the workers, Chromium, the Playwright driver) inherits it from this environment.
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    # Ray's metrics pipeline (every worker reports to the node's dashboard agent, which keeps one series per
    # worker and actor it ever saw): with actors killed and replaced every few seconds its agent grows for the
    # whole run. The soak exports no metrics, so it turns the pipeline off.
    os.environ.setdefault("RAY_enable_metrics_collection", "0")
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
                    options={"browser": "shared"},
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

    engine_class = remote_class(ScriptedEngine)  # one remote class: each ray.remote(cls) call is kept by Ray

    def new_engine(i: int) -> Any:
        return engine_class.options(num_cpus=0).remote(replies, i, delay_s=0.05)

    engines = [new_engine(i) for i in range(2)]
    await asyncio.gather(*(e.start.remote() for e in engines))
    policies = [PolicyConfig(kind="golden"), scripted_policy(generate_timeout_s=10.0)]
    warm_episodes = [
        (
            manager,
            tasks[0],
            tasks[0].platforms[0],
            p,
            engines if p.kind == "engine" else None,
            10.0,
            False,
            120.0,
        )
        for p in policies
    ]
    prestarted = await prestart_workers(int(os.environ["RAY_num_workers_soft_limit"]), warm_episodes)
    bringup_s = time.perf_counter() - t_up
    me = os.getpid()
    t0 = time.monotonic()
    until = t0 + args.minutes * 60
    chaos = Chaos(manager, engines, args.chaos_every_s, args.seed, web)
    monkey = asyncio.ensure_future(chaos.run(until))
    # RSS and open files are sampled between batches, when no episode holds a lease, with the pools back at their
    # warm size and the process set settled (see settle_tree): mid-batch figures swing by hundreds of MB with the
    # number of live Chromium contexts and rollout workers, which is load, not a leak. The start figures are
    # taken after one batch of each policy (rollout workers and engines warm).
    samples: list[dict[str, Any]] = []  # {"t": s since t0, "rss": tree MB, "kinds": {kind: [n, MB, fds]}}
    totals = dict.fromkeys(("success", "failure", "task_error", "infra_failed"), 0)
    attempted = lost_items = batches = 0
    fds_start, start_breakdown = 0, {}

    async def replace_dead_engines() -> None:  # as a driver would, between batches
        for i, e in enumerate(engines):
            if not await alive(e):
                engines[i] = new_engine(i)
        chaos.engines = engines

    traced: dict[str, Any] = {}
    planned_warm = args.warmup_min * 60 if args.warmup_min is not None else warmup_s(args.minutes * 60)
    while time.monotonic() < until - 5:
        if args.tracemalloc and not traced and time.monotonic() - t0 >= planned_warm:
            traced = await tracemalloc_actors(manager, _tracemalloc_start)
        await replace_dead_engines()
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
        async with chaos.quiet:  # killed instances and engines replaced: the same processes at every sample
            await asyncio.gather(manager.wait_ready.remote(60), replace_dead_engines())
            procs = await settle_tree(me)
        kinds = breakdown(procs)
        samples.append(
            {
                "t": time.monotonic() - t0,
                "rss": sum(r[1] for r in kinds.values()),
                "anon": sum(r[3] for r in procs),
                "kinds": kinds,
                "procs": procs,
                "policy": policy.kind,
            }
        )
        if batches == 2:
            fds_start, start_breakdown = sum(int(r[2]) for r in kinds.values()), kinds
        print(
            f"[{(time.monotonic() - t0) / 60:5.1f} min] batch {batches}: {outcome_counts(done)} "
            f"kills={sum(chaos.kills.values())} rss={samples[-1]['rss']:.0f}MB "
            f"fds={sum(int(r[2]) for r in samples[-1]['kinds'].values())}",
            flush=True,
        )
    monkey.cancel()
    if traced:
        traced = await tracemalloc_actors(manager, _tracemalloc_growth)
    minutes = (time.monotonic() - t0) / 60
    await asyncio.gather(manager.wait_ready.remote(60), replace_dead_engines())  # warm size before counting
    end_breakdown = breakdown(await settle_tree(me))
    fds_end = sum(int(r[2]) for r in end_breakdown.values())
    held = await manager.service_held.remote()
    warm_from = args.warmup_min * 60 if args.warmup_min is not None else warmup_s(minutes * 60)
    warm = [x for x in samples if x["t"] >= warm_from]
    # The figure: the least-squares slope of the whole tree's RSS over the samples after the warm-up window.
    # Chaos replaces processes (a fresh one is smaller until it warms, which the random kill times average out)
    # and a leak anywhere in the tree shows here. Per-kind slopes (the same fit on each kind's total) say where.
    policy_of = [x["policy"] for x in warm]
    slope, slope_se = slope_per_min([(x["t"], x["rss"]) for x in warm], policy_of)
    by_kind = {
        k: round(slope_per_min([(x["t"], x["kinds"].get(k, [0, 0.0, 0])[1]) for x in warm], policy_of)[0], 2)
        for k in sorted({k for x in warm for k in x["kinds"]})
    }
    changes = process_changes(warm)
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
        "ray_workers_soft_limit": int(os.environ["RAY_num_workers_soft_limit"]),
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
        "rss_slope_mb_per_min": round(slope, 2),
        "rss_slope_stderr": round(slope_se, 2),
        "rss_slope_by_kind": by_kind,
        # Diagnostics of the same warm samples (not the target): the slope of anonymous RSS (heaps, without
        # code paged in), and of the processes that lived through the whole window (no chaos replacement).
        "rss_anon_slope_mb_per_min": round(
            slope_per_min([(x["t"], x["anon"]) for x in warm], policy_of)[0], 2
        ),
        "rss_slope_lived_through_mb_per_min": round(slope_per_min(lived_through(warm), policy_of)[0], 2),
        # Every change of the process set inside the window: chaos replacements are expected here (they are in
        # the slope, as a sawtooth); anything else is reported, not dropped.
        "process_changes_warm": changes,
        "processes_started_warm": dict(sum((c["started"] for c in changes), Counter())),
        "settings": {k: os.environ[k] for k in SETTINGS},
        "prestarted_workers": prestarted,
        "warmup_min": round(warm_from / 60, 2),
        "warm_samples": len(warm),
        "rss_mb_warm_start": round(warm[0]["rss"], 1) if warm else 0.0,
        "rss_mb_end": round(samples[-1]["rss"], 1) if samples else 0.0,
        "rss_samples": [[round(x["t"], 1), round(x["rss"], 1)] for x in samples],
        "service_held_end": held,
        "trace": samples,
        "fds_start": fds_start,
        "fds_end": fds_end,
        "processes_start": start_breakdown,
        "processes_end": end_breakdown,
        "bringup_s": round(bringup_s, 1),
        **({"tracemalloc_growth": traced} if traced else {}),
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
        (
            f"rss slope after {r['warmup_min']} min warm-up (MB/min, <= 5)",
            f"{r['rss_slope_mb_per_min']} +- {r['rss_slope_stderr']}",
        ),
        (
            "  anonymous rss / processes that lived through",
            f"{r['rss_anon_slope_mb_per_min']} / {r['rss_slope_lived_through_mb_per_min']}",
        ),
        ("  processes started in the window", r["processes_started_warm"] or "none"),
        ("open files start -> end (<= +10 %)", f"{r['fds_start']} -> {r['fds_end']}"),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--chaos-every-s", type=float, default=20.0)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="8 minutes (3 of warm-up, 5 measured) at the target's cadence, a kill every 20 s",
    )
    ap.add_argument(
        "--warmup-min",
        type=float,
        default=None,
        help="minutes left out of the RSS slope (default: 3, or half of a shorter run)",
    )
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--tracemalloc",
        action="store_true",
        help="diagnosis: trace Python allocations in the EnvManager and NodeServices over the warm window",
    )
    ap.add_argument("--backend", choices=("web", "fake"), default="web")
    ap.add_argument("--concurrency", type=int, default=3)
    ap.add_argument("--batch", type=int, default=12, help="episodes per batch")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trace", type=Path, default=None, help="write every sample's per-kind breakdown here")
    ap.add_argument(
        "--gcs-task-events",
        type=int,
        default=2000,
        help="task events Ray's GCS keeps (Ray's default: 100000)",
    )
    args = ap.parse_args()
    if args.quick:
        # A slope over 3 measured minutes with a kill every 10 s had a standard error of ~5 MB/min (a Chromium
        # kill drops ~60 MB of warm renderers at random): 5 minutes at the target's cadence resolve the target.
        args.minutes, args.chaos_every_s = 8.0, 20.0
    result = asyncio.run(soak(args))
    print(table(result))
    if args.trace:
        args.trace.write_text(json.dumps(result.pop("trace")) + "\n")
    result.pop("trace", None)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    sys.exit(0 if result["lost"] == 0 else 1)


if __name__ == "__main__":
    main()
