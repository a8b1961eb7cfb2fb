"""Environment operation figures: bring-up, reset and step latency, and memory per instance.

    python benchmarks/env_ops.py --backend web --instances 16 [--quick] [--json out.json]

For the web backend it measures two browser modes in one run: ``shared`` (one Chromium per node, a context per
env) and ``per_env`` (one Chromium per env actor). Latencies are per operation on the data path (the leased
EnvActor), measured one operation at a time with all N instances alive; ``concurrent`` figures run every
instance at once (2 cores here, so latency there is mostly queueing). Memory is PSS summed over every process
of the env actors and the shared browser (Chromium, Playwright drivers, the actors) divided by N.
Top-level fields describe the default mode; ``modes`` holds every mode measured.

    python benchmarks/env_ops.py --backend desktop --instances 2 [--quick] [--json out.json]

For the desktop backend (Xvfb provider) the modes are ``keep_browser`` (reset kills the editor and terminal,
restores home and wipes the session Chromium over DevTools) and ``relaunch`` (reset also starts a new Chromium).
Memory there adds each desktop's X server, window manager, guest agent and Chromium. ``wait`` steps of golden
solutions are performed but not timed (they sleep by design).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import maigym_ray  # noqa: F401  (loopback Ray settings: must run before ray is imported)

# isort: split

import psutil
import ray

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.envs.manager import EnvManager
from maigym_ray.runtime.ray_init import init_ray
from maigym_ray.tasks.pool import TaskPool

DEFAULT_MODE = {"web": "shared", "desktop": "keep_browser"}
#: modes measured when --modes is not given.
DEFAULT_MODES = {"web": "shared,per_env", "desktop": "keep_browser,relaunch"}


def _kind(p: psutil.Process) -> str:
    try:
        cmd = p.cmdline()
    except psutil.Error:
        return "?"
    if not cmd:
        return p.name()
    kind = next((a.split("=", 1)[1] for a in cmd if a.startswith("--type=")), "")
    base = Path(cmd[0]).name
    if "chrom" in base:
        return f"chromium {kind or 'browser'}"
    return "playwright driver" if base == "node" else p.name()


def pss_by_kind(pid: int) -> dict[str, float]:
    """Proportional set size (MB) of one process and all its descendants, by process kind."""
    out: dict[str, float] = {}
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            for line in Path(f"/proc/{p.pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    k = _kind(p)
                    out[k] = out.get(k, 0.0) + int(line.split()[1]) / 1024
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


async def measure(mode: str, n: int, rounds: int, platform: str, backend: str = "web") -> dict:
    if backend == "desktop":
        # keep_browser: reset wipes the session Chromium over DevTools; relaunch: reset starts a new Chromium
        pool = PoolConfig(
            platform="desktop",
            backend="desktop",
            target_size=n,
            max_size=n,
            recycle_after=0,
            # terminal: the built-in desktop tasks' goldens use it, and it is opt-in (as conf/backends/desktop.yaml)
            options={"keep_browser": mode == "keep_browser", "terminal": True},
        )
    else:
        pool = PoolConfig(
            platform=platform,
            target_size=n,
            max_size=n,
            recycle_after=0,
            options={"platform": platform, "browser": mode},
        )
    slow = {"start_timeout_s": 180.0, "reset_timeout_s": 60.0} if backend == "desktop" else {}
    cfg = EnvManagerConfig(pools={platform: pool}, health_interval_s=60, **slow)
    tasks = [t for t in TaskPool.builtin() if platform in t.platforms]
    mgr = ray.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg, TaskPool(tasks))
    print(f"[env_ops] {mode}: bring-up of {n} instances", flush=True)
    t0 = time.perf_counter()
    await mgr.start.remote(wait=True)
    bringup = time.perf_counter() - t0
    print(
        f"[env_ops] {mode}: reset/step latency, {rounds} rounds (brought up in {bringup:.1f} s)", flush=True
    )
    leases = await mgr.request.remote(n, platform)
    actors = [await mgr.actor.remote(lease) for lease in leases]
    await asyncio.sleep(2.0)  # let start-up work drain before measuring

    resets, steps, mgr_steps = [], [], []
    for r in range(rounds + 1):  # one op at a time, round-robin over instances and tasks; round 0 warms up
        if r == 1:
            resets, steps = [], []
        for i, actor in enumerate(actors):
            task = tasks[(r * n + i) % len(tasks)]
            t = time.perf_counter()
            await actor.reset.remote(task)
            resets.append(time.perf_counter() - t)
            for g in task.golden[:6]:
                if g.startswith(("answer(", "wait(")):  # no device work: not an environment latency
                    continue
                t = time.perf_counter()
                res = await actor.step.remote(g)
                steps.append(time.perf_counter() - t)
                assert not res.observation.last_action_error, (task.id, g, res.observation.last_action_error)
    for lease, task in zip(leases, tasks, strict=False):  # the same steps through the manager's lease API
        await mgr.reset.remote(lease, task)
        t = time.perf_counter()
        await mgr.observe.remote(lease)
        mgr_steps.append(time.perf_counter() - t)

    async def episode(actor, task) -> list[float]:
        await actor.reset.remote(task)
        out = []
        for g in task.golden:
            t = time.perf_counter()
            await actor.step.remote(g)
            if not g.startswith("wait("):
                out.append(time.perf_counter() - t)
        return out

    print(f"[env_ops] {mode}: {n} concurrent episodes", flush=True)
    t = time.perf_counter()
    conc = await asyncio.gather(*(episode(a, tasks[i % len(tasks)]) for i, a in enumerate(actors)))
    conc_s = time.perf_counter() - t
    conc_steps = [x for xs in conc for x in xs]

    insts = await mgr.instances.remote()
    services = await mgr.service_pids.remote()
    pids = [i["pid"] for i in insts] + [services["node_services"]]
    breakdown: dict[str, float] = {}
    for p in pids:
        for k, v in pss_by_kind(p).items():
            breakdown[k] = breakdown.get(k, 0.0) + v / n
    mem = sum(breakdown.values())
    for lease in leases:
        await mgr.release.remote(lease)
    await mgr.shutdown.remote()
    ray.kill(mgr)
    return {
        "mode": mode,
        "instances": n,
        "bringup_s": bringup,
        "reset_p50_s": pct(resets, 0.5),
        "reset_p95_s": pct(resets, 0.95),
        "step_p50_s": pct(steps, 0.5),
        "step_p95_s": pct(steps, 0.95),
        "observe_via_manager_p50_s": pct(mgr_steps, 0.5),
        "rss_mb_per_instance": mem,
        "memory_mb_per_instance_by_process": {k: round(v, 1) for k, v in sorted(breakdown.items())},
        "concurrent": {
            "step_p50_s": pct(conc_steps, 0.5),
            "steps_per_s": len(conc_steps) / conc_s,
            "steps": len(conc_steps),
        },
        "samples": {"resets": len(resets), "steps": len(steps)},
        "step_mean_s": statistics.fmean(steps) if steps else 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--backend", default="web", choices=["web", "desktop"])
    ap.add_argument(
        "--platform", default="", choices=["", "web", "mobile_web", "desktop"], help="default: per backend"
    )
    ap.add_argument("--instances", type=int, default=0, help="default 16; 2 with --quick")
    ap.add_argument("--modes", default="", help="web: shared,per_env; desktop: keep_browser,relaunch")
    ap.add_argument("--quick", action="store_true", help="2 instances, fewer rounds; about a minute")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    init_ray()
    rounds = 2 if args.quick else 5
    # --quick alone must fit a 2-core machine: 16 desktops (a headful Chromium each) would not
    args.instances = args.instances or (2 if args.quick else 16)
    args.platform = args.platform or ("desktop" if args.backend == "desktop" else "web")
    names = (args.modes or DEFAULT_MODES[args.backend]).split(",")
    modes = {m: asyncio.run(measure(m, args.instances, rounds, args.platform, args.backend)) for m in names}
    default = DEFAULT_MODE[args.backend] if DEFAULT_MODE[args.backend] in modes else next(iter(modes))
    out = {
        **{k: v for k, v in modes[default].items()},
        "backend": args.backend,
        "platform": args.platform,
        "default_mode": default,
        "modes": modes,
        "quick": args.quick,
    }
    cols = ["bringup_s", "reset_p50_s", "reset_p95_s", "step_p50_s", "step_p95_s", "rss_mb_per_instance"]
    print(f"env_ops: backend={args.backend} platform={args.platform} instances={args.instances}")
    print(f"{'mode':10s}" + "".join(f"{c:>22s}" for c in cols) + f"{'conc steps/s':>16s}")
    for m, r in modes.items():
        print(f"{m:10s}" + "".join(f"{r[c]:22.3f}" for c in cols) + f"{r['concurrent']['steps_per_s']:16.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
