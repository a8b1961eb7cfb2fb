"""Asynchronous against synchronous GRPO on this machine: the same model, recipe and number of policy updates.

    python benchmarks/async_rl.py [--seeds N] [--rounds R] [--quick] [--json out.json] [--workdir DIR] [--reuse]
                                  [--max-staleness K] [--oversubscription X] [--override KEY=VALUE ...]

Each arm is ``python -m maigym_ray.cli.train experiment=debug driver.seed=S driver.grpo.rounds=R`` in a subprocess
(its own Ray, engine, trainer and Chromium pool), with ``driver.mode=sync`` or ``driver.mode=async``; the async
arm adds ``driver.max_staleness=K``, ``driver.pool_oversubscription=X`` and ``trainer.correction=decoupled``. Both
arms run the SFT warm-up and the held-out evals as the main job does; the figures below are of the RL phase,
read from each run's ``report.json`` history (one entry a policy update, rl/driver.py):

- ``sync_wall_s`` / ``async_wall_s``: the RL phase's wall time (the sum of the rounds' ``round_s``), mean over
  seeds; ``speedup`` = their ratio, and per seed;
- ``trainer_idle_share``: 1 - (update + weight sync seconds) / RL wall; ``engine_idle_share``: 1 - the seconds
  the engine had a request in flight (policy/busy_clock.py) / RL wall; per arm, mean over seeds;
- ``heldout_success``: after RL, per arm, mean over seeds, with each seed and the standard error;
- ``mean_staleness`` (async, over the groups trained) and ``clip_frac_by_staleness`` (async: clipped / trained
  tokens at each staleness, summed over every update of every seed);
- ``step_normalizers`` (seed 0, async): the run with ``driver.grpo.step_normalizer=trajectory`` (1/|tau|) and
  with ``constant`` (1/k): held-out success and clip rate beside the default (none: trainer.aggregation).

``--quick`` runs one seed of two rounds, short evals and a short warm-up: a smoke run of the plumbing, not a
measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from statistics import mean, stdev
from typing import Any

from train_job import read_training, run_training

QUICK = [
    "driver.heldout.episodes_per_task=1",
    "driver.sft.steps=20",
    "tasks.family_heldout=4",
]


def job(overrides: list[str], out: Path, reuse: bool) -> dict[str, Any]:
    """One training run, or with ``reuse`` the finished run found at ``out`` read back."""
    report = (reuse and read_training(out)) or run_training(overrides, out)
    report["command"] = report.get("command") or "python -m maigym_ray.cli.train " + " ".join(overrides)
    return report


def rl_figures(report: dict[str, Any]) -> dict[str, Any]:
    """The RL phase of one run: wall, idle shares, staleness and clip counts per staleness."""
    h = report["history"]
    wall = sum(x["round_s"] for x in h)
    clipped: dict[int, float] = {}
    trained: dict[int, float] = {}
    for x in h:
        for k, v in x.items():
            if k.startswith("trained_s"):
                s = int(k[len("trained_s") :])
                trained[s] = trained.get(s, 0.0) + v
                clipped[s] = clipped.get(s, 0.0) + x.get(f"clipped_s{s}", 0.0)
    groups = [x for x in h if x["sequences"]]
    return {
        "wall_s": wall,
        "trainer_idle_share": 1.0 - sum(x["update_s"] + x["sync_s"] for x in h) / wall,
        "engine_idle_share": 1.0 - sum(x["engine_busy_s"] for x in h) / wall,
        "mean_staleness": mean(x["staleness_mean"] for x in groups) if groups else 0.0,
        "stale_groups": sum(x["stale_groups"] for x in h),
        "episodes": sum(x["episodes"] for x in h),
        "updates": len(h),
        "clipped": clipped,
        "trained": trained,
        "job_s": report["wall_s"] or 0.0,
        "heldout_success": report["heldout_success_rl"],
        "heldout_success_sft": report["heldout_success_sft"],
        "command": report["command"],
    }


def _se(xs: list[float]) -> float:
    return stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0


def _clip_frac(runs: list[dict[str, Any]]) -> dict[str, float]:
    clipped: dict[int, float] = {}
    trained: dict[int, float] = {}
    for r in runs:
        for s, n in r["trained"].items():
            trained[s] = trained.get(s, 0.0) + n
            clipped[s] = clipped.get(s, 0.0) + r["clipped"].get(s, 0.0)
    return {str(s): clipped[s] / trained[s] for s in sorted(trained) if trained[s]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=8, help="policy updates per arm")
    ap.add_argument("--max-staleness", type=int, default=1)
    ap.add_argument("--oversubscription", type=float, default=2.0)
    ap.add_argument("--no-normalizers", action="store_true", help="skip the step-normaliser runs")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--workdir", default="", help="where the runs go (default: a temp dir)")
    ap.add_argument("--reuse", action="store_true", help="read back the runs already finished in --workdir")
    ap.add_argument("--override", action="append", default=[], help="a Hydra override for every run")
    ap.add_argument("--sync-override", action="append", default=[], help="a Hydra override for the sync arm")
    ap.add_argument(
        "--async-override", action="append", default=[], help="a Hydra override for the async arm"
    )
    args = ap.parse_args()
    seeds = 1 if args.quick else args.seeds
    rounds = 2 if args.quick else args.rounds
    work = Path(args.workdir or tempfile.mkdtemp(prefix="async-rl-"))
    # the eval before training is the same for both arms, and no figure here uses it
    base = [
        "experiment=debug",
        f"driver.grpo.rounds={rounds}",
        "driver.heldout.before=false",
        *(QUICK if args.quick else []),
        *args.override,
    ]
    arms = {
        "sync": ["driver.mode=sync", *args.sync_override],
        "async": [
            "driver.mode=async",
            f"driver.max_staleness={args.max_staleness}",
            f"driver.pool_oversubscription={args.oversubscription}",
            "trainer.correction=decoupled",
            *args.async_override,
        ],
    }
    runs: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
    for s in range(seeds):
        for arm, extra in arms.items():  # the arms alternate, so a slow spell of the machine hits both
            runs[arm].append(
                rl_figures(job([*base, f"driver.seed={s}", *extra], work / f"{arm}-{s}", args.reuse))
            )
            print(
                f"seed {s} {arm}: {runs[arm][-1]['wall_s']:.0f} s, held-out {runs[arm][-1]['heldout_success']}"
            )
    wall = {a: mean(r["wall_s"] for r in runs[a]) for a in arms}
    held = {a: [r["heldout_success"] for r in runs[a]] for a in arms}
    out: dict[str, Any] = {
        "quick": args.quick,
        "seeds": seeds,
        "rounds": rounds,
        "max_staleness": args.max_staleness,
        "pool_oversubscription": args.oversubscription,
        "sync_wall_s": wall["sync"],
        "async_wall_s": wall["async"],
        "speedup": wall["sync"] / wall["async"],
        "sync_wall_by_seed": [r["wall_s"] for r in runs["sync"]],
        "async_wall_by_seed": [r["wall_s"] for r in runs["async"]],
        "speedup_by_seed": [
            s["wall_s"] / a["wall_s"] for s, a in zip(runs["sync"], runs["async"], strict=True)
        ],
        "trainer_idle_share": {a: mean(r["trainer_idle_share"] for r in runs[a]) for a in arms},
        "engine_idle_share": {a: mean(r["engine_idle_share"] for r in runs[a]) for a in arms},
        "heldout_success": {a: mean(held[a]) for a in arms},
        "heldout_success_by_seed": held,
        "heldout_success_se": {a: _se(held[a]) for a in arms},
        "mean_staleness": mean(r["mean_staleness"] for r in runs["async"]),
        "stale_groups": sum(r["stale_groups"] for r in runs["async"]),
        "clip_frac_by_staleness": _clip_frac(runs["async"]),
        "clip_frac_by_staleness_sync": _clip_frac(runs["sync"]),
        "step_normalizers": {},
        "episodes": {a: sum(r["episodes"] for r in runs[a]) for a in arms},
        "commands": {a: [r["command"] for r in runs[a]] for a in arms},
        # the runs' own wall time (with --reuse, what they took when they ran)
        "wall_s": sum(r["job_s"] for a in arms for r in runs[a]),
    }
    print(f"{'':8} {'RL wall s':>10} {'trainer idle':>13} {'engine idle':>12} {'held-out':>9}")
    for a in arms:
        print(
            f"{a:8} {wall[a]:10.1f} {out['trainer_idle_share'][a]:13.2f} {out['engine_idle_share'][a]:12.2f} "
            f"{out['heldout_success'][a]:9.3f}"
        )
    print(
        f"speedup {out['speedup']:.2f} (by seed {', '.join(f'{x:.2f}' for x in out['speedup_by_seed'])}); "
        f"mean staleness {out['mean_staleness']:.2f}; clip by staleness {out['clip_frac_by_staleness']}"
    )
    if args.json:  # written now and again after the normaliser runs, so a long run keeps its main figures
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    normalizers: dict[str, Any] = {}
    if not args.quick and not args.no_normalizers:
        for norm in ("trajectory", "constant"):
            r = rl_figures(
                job(
                    [*base, "driver.seed=0", *arms["async"], f"driver.grpo.step_normalizer={norm}"],
                    work / norm,
                    args.reuse,
                )
            )
            out["wall_s"] += r["job_s"]
            normalizers[norm] = {
                "heldout_success": r["heldout_success"],
                "wall_s": r["wall_s"],
                "clip_frac_by_staleness": _clip_frac([r]),
                "command": r["command"],
            }
        normalizers["none"] = {
            "heldout_success": runs["async"][0]["heldout_success"],
            "wall_s": runs["async"][0]["wall_s"],
            "clip_frac_by_staleness": _clip_frac(runs["async"][:1]),
            "command": runs["async"][0]["command"],
        }
    out["step_normalizers"] = normalizers
    for norm, r in normalizers.items():
        print(
            f"step normaliser {norm}: held-out {r['heldout_success']}, clip by staleness {r['clip_frac_by_staleness']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
