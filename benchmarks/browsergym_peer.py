"""The BrowserGym side of benchmarks/vs_browsergym.py. Runs in BrowserGym's own venv (made by that script), so it
imports nothing of maigym_ray: only the standard library, gymnasium and browsergym.

    <venv>/bin/python benchmarks/browsergym_peer.py latency    --tasks a,b --episodes E --steps K --chromium PATH
    <venv>/bin/python benchmarks/browsergym_peer.py throughput --tasks a,b --episodes E --steps K --chromium PATH \
        --workers 8

Environments are BrowserGym's as shipped (``browsergym/miniwob.<task>``, headless), with two settings: Debian's
Chromium through ``pw_chromium_kwargs={"executable_path": ...}`` and the coordinate action set, so a step is
the same click at the same CSS pixel as ours. Prints one JSON object on the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

#: The step both sides take: a click on the task's instruction text (CSS px), which ends no episode.
CLICK_CSS = (80, 25)


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                pass
    return out


def pss_mb(pid: int) -> float:
    """PSS (MB) of a process and all its descendants (the Playwright driver and Chromium)."""
    total = 0
    for p in _tree(pid):
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def make_env(task: str, chromium: str):
    import browsergym.miniwob  # noqa: F401  (registers browsergym/miniwob.*)
    import gymnasium as gym
    from browsergym.core.action.highlevel import HighLevelActionSet

    return gym.make(
        f"browsergym/miniwob.{task}",
        headless=True,
        pw_chromium_kwargs={"executable_path": chromium},
        action_mapping=HighLevelActionSet(subsets=["coord"], strict=False).to_python_code,
    )


def episode(env, seed: int, steps: int, resets: list[float], step_s: list[float]) -> None:
    t = time.perf_counter()
    env.reset(seed=seed)
    resets.append(time.perf_counter() - t)
    for _ in range(steps):
        t = time.perf_counter()
        info = env.step(f"mouse_click({CLICK_CSS[0]}, {CLICK_CSS[1]})")[4]
        step_s.append(time.perf_counter() - t)
        if info.get("last_action_error"):
            raise RuntimeError(f"the peer's click failed: {info['last_action_error']}")


def latency(args: argparse.Namespace) -> dict:
    resets: list[float] = []
    steps: list[float] = []
    for name in args.tasks.split(","):
        env = make_env(name, args.chromium)
        try:
            for e in range(args.episodes + 1):  # episode 0 warms up (first browser launch, imports)
                r, s = ([], []) if e == 0 else (resets, steps)
                episode(env, 1000 + e, args.steps, r, s)
        finally:
            env.close()
    return {"resets": resets, "steps": steps}


def _worker(args: argparse.Namespace, index: int, barrier, queue) -> None:
    names = args.tasks.split(",")
    envs = {names[index % len(names)]: make_env(names[index % len(names)], args.chromium)}  # imports done
    pss = 0.0
    done = 0
    barrier.wait()  # every worker imported BrowserGym: the clock starts
    start = time.time()
    try:
        for e in range(args.episodes):
            name = names[(index + e) % len(names)]
            env = envs.get(name) or envs.setdefault(name, make_env(name, args.chromium))
            episode(env, 2000 + index * 100 + e, args.steps, [], [])
            if e == 0:  # every worker's browser is up: measure them side by side
                barrier.wait()
                pss = pss_mb(os.getpid())
                barrier.wait()
            done += 1
    finally:
        for env in envs.values():
            env.close()
    queue.put({"episodes": done, "pss_mb": pss, "start": start, "end": time.time()})


def throughput(args: argparse.Namespace) -> dict:
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(args.workers), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(args, i, barrier, queue)) for i in range(args.workers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=1800) for _ in procs]
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    for p in procs:
        p.join()
    return {
        "episodes": sum(r["episodes"] for r in results),
        "seconds": wall,
        "pss_mb_per_instance": sum(r["pss_mb"] for r in results) / len(results),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["latency", "throughput"])
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--chromium", required=True)
    args = ap.parse_args()
    if not os.environ.get("MINIWOB_URL"):
        print("MINIWOB_URL is not set", file=sys.stderr)
        return 2
    out = latency(args) if args.mode == "latency" else throughput(args)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
