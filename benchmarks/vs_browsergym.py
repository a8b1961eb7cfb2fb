"""Side by side with BrowserGym: the same MiniWoB++ tasks on the same Debian Chromium, in one run.

    python benchmarks/vs_browsergym.py [--tasks a,b,...] [--workers 8] [--quick] [--json out.json]

BrowserGym runs in a venv of its own that this script makes on first use (``--venv``, default
``~/.cache/maigym/browsergym-venv``): ``browsergym-miniwob`` with the ``playwright==1.44`` it pins, from PyPI.
No browser is downloaded: both sides launch the Chromium that ``find_chromium`` picks (Debian's), BrowserGym
through ``pw_chromium_kwargs={"executable_path": ...}``. Both open the task pages of the ``miniwob`` wheel from
disk (BrowserGym through ``MINIWOB_URL``).

One episode on either side is a reset to (task, seed) and ``--steps`` steps, each the same click on the task's
instruction text (CSS pixel 80, 25; it ends no episode), with the observation that follows it: ours a
screenshot plus accessibility text, BrowserGym's its default (screenshot, AXTree, DOM). Figures:

- reset p50 and step p50: one instance, one operation at a time (the first episode of each task warms up);
- PSS per instance: with ``--workers`` instances alive at once, right after the episodes/s run, the PSS
  (``/proc/<pid>/smaps_rollup``; a page shared by k processes counts 1/k in each) of every process they use,
  each process counted once, summed and divided by the number of instances. Ours: the env actor processes (with
  ``manager_config``'s pool, up to 8 instances share one, ``PoolConfig.instances_per_actor``) and the node's
  NodeServices process with all its children (the shared Chromium's browser, GPU, utility, zygote and renderer
  processes, the Playwright driver); Ray's own daemons (raylet, GCS, dashboard) and the EnvManager are not
  counted on either side's behalf. BrowserGym: each env's Python process and all its children (Playwright
  driver, the task's Chromium and its chat window's Chromium);
- episodes per second: ``--workers`` instances running episodes at once, from the moment all are up.

Ours runs first and is shut down before BrowserGym starts, so neither competes with the other for the cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import maigym_ray  # noqa: F401  (loopback Ray settings: must run before ray is imported)

# isort: split

import ray
from env_ops import pct, pss_by_kind  # benchmarks/ is the script's folder

from maigym_ray.config import RayConfig
from maigym_ray.envs.backends.chromium import find_chromium
from maigym_ray.envs.lease import LeasedEnv
from maigym_ray.envs.manager import EnvManager
from maigym_ray.runtime.placement import Placement
from maigym_ray.runtime.ray_init import init_ray
from maigym_ray.runtime.topology import TopologyConfig
from maigym_ray.suites.miniwob import DEFAULT_SIZE, html_dir, manager_config, miniwob_task

#: What the peer venv gets (BrowserGym pins playwright 1.44; pinned here so a rerun measures the same code).
PEER_REQUIREMENTS = ("browsergym-miniwob==0.14.3", "playwright==1.44.0")
DEFAULT_TASKS = "click-button,click-link,enter-text,click-dialog,click-checkboxes,focus-text"
PEER_SCRIPT = Path(__file__).with_name("browsergym_peer.py")
#: The click both sides take, in CSS pixels (the peer's CLICK_CSS), and as our 0..1000 coordinates.
CLICK_CSS = (80, 25)
CLICK = f"click(x={round(CLICK_CSS[0] * 1000 / DEFAULT_SIZE[0])}, y={round(CLICK_CSS[1] * 1000 / DEFAULT_SIZE[1])})"


def ensure_peer_venv(venv: Path) -> Path:
    """BrowserGym's venv, made (``python -m venv`` + pip from PyPI) when missing or pinned differently."""
    py = venv / "bin" / "python"
    stamp = venv / "maigym-requirements.txt"
    want = "\n".join(PEER_REQUIREMENTS)
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return py
    print(f"[vs_browsergym] making BrowserGym's venv at {venv} ({', '.join(PEER_REQUIREMENTS)})", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PEER_REQUIREMENTS],
        check=True,
    )
    stamp.write_text(want)
    return py


def peer_browsers(py: Path, venv: Path, chromium: str) -> Path:
    """A Playwright browsers folder for the peer whose only "browser" is a link to ``chromium``.

    BrowserGym passes ``pw_chromium_kwargs`` to the task's browser only; its chat window launches a second
    Chromium per env with Playwright's default executable. Pointing ``PLAYWRIGHT_BROWSERS_PATH`` at this folder
    makes that default the same Debian Chromium, so nothing is downloaded and both of its browsers are ours."""
    folder = venv / "ms-playwright"
    code = (
        "from playwright.sync_api import sync_playwright\n"
        "p = sync_playwright().start(); print(p.chromium.executable_path); p.stop()"
    )
    env = {**os.environ, "PLAYWRIGHT_BROWSERS_PATH": str(folder)}
    env.pop("PYTHONPATH", None)
    out = subprocess.run([str(py), "-c", code], env=env, check=True, capture_output=True, text=True)
    expected = Path(out.stdout.strip().splitlines()[-1])
    expected.parent.mkdir(parents=True, exist_ok=True)
    if expected.is_symlink() or expected.exists():
        expected.unlink()
    expected.symlink_to(chromium)
    return folder


def peer_versions(py: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({p: m.version(p) for p in ('browsergym-core', 'browsergym-miniwob', 'playwright')}))"
    )
    return json.loads(
        subprocess.run([str(py), "-c", code], check=True, capture_output=True, text=True).stdout
    )


def run_peer(
    py: Path, mode: str, args: argparse.Namespace, chromium: str, episodes: int, browsers: Path
) -> dict:
    env = {
        **os.environ,
        "MINIWOB_URL": html_dir().resolve().as_uri() + "/",
        "PLAYWRIGHT_BROWSERS_PATH": str(browsers),
    }
    env.pop("PYTHONPATH", None)  # nothing of ours in the peer's interpreter
    cmd = [
        str(py),
        str(PEER_SCRIPT),
        mode,
        *("--tasks", args.tasks, "--episodes", str(episodes), "--steps", str(args.steps)),
        *("--workers", str(args.workers), "--chromium", chromium),
    ]
    print(f"[vs_browsergym] BrowserGym {mode}", flush=True)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if args.keep_logs:
        Path(args.keep_logs).with_suffix(f".{mode}.stderr").write_text(proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"BrowserGym {mode} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


async def run_ours(args: argparse.Namespace, latency_episodes: int, tput_episodes: int) -> dict:
    names = args.tasks.split(",")
    cfg = manager_config(args.workers, screenshot=True)
    cfg.pools["miniwob"].options["executable"] = args.chromium  # the binary both sides launch
    cfg.health_interval_s = 60.0  # no health probes inside the timings
    manager = ray.remote(EnvManager).options(**Placement(TopologyConfig()).env_manager()).remote(cfg)
    print(f"[vs_browsergym] ours: bring-up of {args.workers} instances", flush=True)
    await manager.start.remote(wait=True)

    async def episode(env: LeasedEnv, name: str, seed: int, resets: list[float], steps: list[float]) -> None:
        t = time.perf_counter()
        await env.reset(miniwob_task(name, seed))
        resets.append(time.perf_counter() - t)
        for _ in range(args.steps):
            t = time.perf_counter()
            res = await env.step(CLICK)
            steps.append(time.perf_counter() - t)
            if res.observation.last_action_error:
                raise RuntimeError(f"our click failed: {res.observation.last_action_error}")

    print("[vs_browsergym] ours latency", flush=True)
    resets: list[float] = []
    steps: list[float] = []
    env = await LeasedEnv.acquire(manager, "web")
    for name in names:
        for e in range(latency_episodes + 1):  # episode 0 warms up, as on the peer's side
            r, s = ([], []) if e == 0 else (resets, steps)
            await episode(env, name, 1000 + e, r, s)
    await env.release()

    print(f"[vs_browsergym] ours throughput, {args.workers} instances", flush=True)
    envs = [LeasedEnv(manager, lease) for lease in await manager.request.remote(args.workers, "web")]
    for i, e in enumerate(envs):  # every instance up and on its first page before the clock starts
        await e.reset(miniwob_task(names[i % len(names)], 1))
    done = 0

    async def worker(i: int, e: LeasedEnv) -> None:
        nonlocal done
        for k in range(tput_episodes):
            await episode(e, names[(i + k) % len(names)], 2000 + i * 100 + k, [], [])
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i, e) for i, e in enumerate(envs)))
    wall = time.perf_counter() - t0
    insts = await manager.instances.remote()
    services = await manager.service_pids.remote()
    # Instances that share an env actor process (PoolConfig.instances_per_actor) report its pid each: count
    # every process once.
    pids = sorted({i["pid"] for i in insts} | {services["node_services"]})
    breakdown: dict[str, float] = {}
    for p in pids:
        for k, v in pss_by_kind(p).items():
            breakdown[k] = breakdown.get(k, 0.0) + v / len(insts)
    for e in envs:
        await e.release()
    await manager.shutdown.remote()
    return {
        "resets": resets,
        "steps": steps,
        "episodes": done,
        "seconds": wall,
        "pss_mb_per_instance": sum(breakdown.values()),
        "pss_by_process": {k: round(v, 1) for k, v in sorted(breakdown.items())},
        "instances": len(insts),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=DEFAULT_TASKS, help="comma-separated MiniWoB++ task names")
    ap.add_argument("--workers", type=int, default=8, help="instances alive at once (memory, episodes/s)")
    ap.add_argument("--steps", type=int, default=3, help="steps per episode")
    ap.add_argument("--episodes", type=int, default=4, help="timed episodes per task (latency)")
    ap.add_argument("--tput-episodes", type=int, default=4, help="episodes per instance (episodes/s)")
    ap.add_argument("--quick", action="store_true", help="2 timed episodes per task, 2 per instance")
    ap.add_argument(
        "--chromium", default="", help="the Chromium both sides launch (default: find_chromium's)"
    )
    ap.add_argument("--venv", default=str(Path.home() / ".cache" / "maigym" / "browsergym-venv"))
    ap.add_argument("--json", default="")
    ap.add_argument("--keep-logs", default="", help="write the peer's stderr next to this path")
    args = ap.parse_args()
    lat_eps, tput_eps = (2, 2) if args.quick else (args.episodes, args.tput_episodes)
    chromium = args.chromium = find_chromium(args.chromium)
    peer_py = ensure_peer_venv(Path(args.venv))
    browsers = peer_browsers(peer_py, Path(args.venv), chromium)
    versions = peer_versions(peer_py)

    init_ray(RayConfig(num_cpus=2, object_store_mb=256))
    try:
        ours = asyncio.run(run_ours(args, lat_eps, tput_eps))
    finally:
        ray.shutdown()
    peer_lat = run_peer(peer_py, "latency", args, chromium, lat_eps, browsers)
    peer_tput = run_peer(peer_py, "throughput", args, chromium, tput_eps, browsers)

    out = {
        "tasks": args.tasks.split(","),
        "chromium": chromium,
        "peer": versions,
        "workers": args.workers,
        "steps_per_episode": args.steps,
        "ours_reset_p50_s": round(pct(ours["resets"], 0.5), 4),
        "peer_reset_p50_s": round(pct(peer_lat["resets"], 0.5), 4),
        "ours_step_p50_s": round(pct(ours["steps"], 0.5), 4),
        "peer_step_p50_s": round(pct(peer_lat["steps"], 0.5), 4),
        "ours_pss_mb": round(ours["pss_mb_per_instance"], 1),
        "peer_pss_mb": round(peer_tput["pss_mb_per_instance"], 1),
        "ours_eps_per_s": round(ours["episodes"] / ours["seconds"], 3),
        "peer_eps_per_s": round(peer_tput["episodes"] / peer_tput["seconds"], 3),
        "ours_pss_by_process": ours["pss_by_process"],
        "samples": {
            "ours_resets": len(ours["resets"]),
            "ours_steps": len(ours["steps"]),
            "peer_resets": len(peer_lat["resets"]),
            "peer_steps": len(peer_lat["steps"]),
            "ours_episodes": ours["episodes"],
            "peer_episodes": peer_tput["episodes"],
        },
    }
    rows = [
        ("reset p50 (s)", "reset_p50_s", True),
        ("step p50 (s)", "step_p50_s", True),
        ("PSS per instance (MB)", "pss_mb", True),
        (f"episodes/s, {args.workers} at once", "eps_per_s", False),
    ]
    print(f"{'':28s} {'ours':>10s} {'BrowserGym':>11s} {'advantage':>10s}")
    for label, key, lower in rows:
        o, p = out[f"ours_{key}"], out[f"peer_{key}"]
        adv = (p / o if lower else o / p) if o and p else float("nan")
        print(f"{label:28s} {o:10.3f} {p:11.3f} {adv:9.1f}x")
    print(f"tasks: {', '.join(out['tasks'])}; Chromium {chromium}; BrowserGym {versions}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
