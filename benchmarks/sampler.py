"""Zero-variance share of GRPO groups: adaptive against uniform task sampling on a skewed pool.

    python benchmarks/sampler.py [--quick] [--json out.json]

A simulated policy solves each task with a fixed probability drawn from a skewed pool (half never solved,
a fifth nearly always solved, the rest in between), and both samplers spend the same rollout budget per
round. The main figures count rollouts: the share of all rollouts that land in groups whose rewards are all
equal, which therefore carry no GRPO gradient. The share of groups is reported too.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from maigym_ray.rl.sampler import AdaptiveSampler, SamplerConfig


def skewed_pool(n: int, rng: random.Random) -> dict[str, float]:
    probs = {}
    for i in range(n):
        u = rng.random()
        probs[f"t{i:04d}"] = 0.0 if u < 0.5 else (0.97 if u < 0.7 else rng.uniform(0.1, 0.8))
    return probs


def simulate(mode: str, probs: dict[str, float], rounds: int, budget: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    sampler = AdaptiveSampler(list(probs), SamplerConfig(mode=mode), seed=seed)
    groups = zero_groups = rollouts = zero_rollouts = 0
    for _ in range(rounds):
        spent = 0
        plan = sampler.plan(num_groups=len(probs))
        for task, n in plan:
            if spent + n > budget:
                continue
            spent += n
            rewards = [float(rng.random() < probs[task]) for _ in range(n)]
            sampler.update(task, rewards)
            zero = len(set(rewards)) == 1
            groups += 1
            zero_groups += zero
            rollouts += n
            zero_rollouts += n * zero
    return {
        "zero_var_share": zero_rollouts / rollouts,
        "zero_var_group_share": zero_groups / groups,
        "rollouts": rollouts,
        "groups": groups,
        "final": sampler.stats(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    n, rounds = (200, 30) if args.quick else (1000, 100)
    probs = skewed_pool(n, random.Random(0))
    budget = 256  # rollouts per round
    res = {m: simulate(m, probs, rounds, budget, seed=1) for m in ("adaptive", "uniform")}
    out = {
        "adaptive_zero_var_share": res["adaptive"]["zero_var_share"],
        "uniform_zero_var_share": res["uniform"]["zero_var_share"],
        "adaptive_zero_var_group_share": res["adaptive"]["zero_var_group_share"],
        "uniform_zero_var_group_share": res["uniform"]["zero_var_group_share"],
        "tasks": n,
        "rounds": rounds,
        "rollouts_per_round": budget,
        "runs": res,
        "quick": args.quick,
    }
    print(
        f"{'sampler':10s} {'zero-var rollouts':>18s} {'zero-var groups':>16s} {'rollouts':>9s} {'groups':>7s}"
    )
    for m, r in res.items():
        print(
            f"{m:10s} {r['zero_var_share']:18.3f} {r['zero_var_group_share']:16.3f} {r['rollouts']:9d} {r['groups']:7d}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
