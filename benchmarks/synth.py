"""Synthesis throughput: validated tasks, apps, cross-app share and rejections of one ``cli.synth`` run.

    python benchmarks/synth.py [--quick] [--json out.json] [--worlds N] [--concurrency C]

Runs the whole pipeline of ``python -m maigym_ray.cli.synth`` (worlds -> templates -> planner -> live
validation on Chromium through the EnvManager -> Parquet pool) and reports what it made and how long it took.
``--quick`` synthesises 3 worlds (~130 tasks); the full run 50 worlds (~2,300 tasks). The target: at least
2,000 validated tasks over at least 12 apps in at most 30 minutes on a 2-core machine, 40 % or more cross-app.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from maigym_ray.runtime.schema import SynthConfig
from maigym_ray.runtime.synthesis import synthesize


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--worlds", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", default="", help="where the pool goes (default: a temporary folder)")
    args = ap.parse_args()
    cfg = SynthConfig(worlds=args.worlds or (3 if args.quick else 50), concurrency=args.concurrency)
    out_dir = Path(args.out or tempfile.mkdtemp(prefix="maigym_synth_"))
    report = asyncio.run(synthesize(cfg, out_dir))
    out = {
        "tasks_validated": report["tasks_validated"],
        "apps": report["apps"],
        "cross_app_share": report["cross_app_share"],
        "rejected_by_reason": report["rejected_by_reason"],
        "rejection_rate": report["rejection_rate"],
        "infra_failures": report["infra_failures"],
        "seconds": report["seconds"],
        "tasks_per_s": report["tasks_validated"] / report["seconds"] if report["seconds"] else 0.0,
        "by_split": report["by_split"],
        "templates": report["templates"],
        "worlds": report["worlds"],
        "concurrency": args.concurrency,
        "validate_step_p50_s": report["validate_step_p50_s"],
        "pool": str(out_dir / "pool.parquet"),
        "quick": args.quick,
    }
    print(
        f"{'worlds':>7s} {'validated':>10s} {'apps':>5s} {'cross-app':>10s} {'rejected':>9s} {'seconds':>8s} {'tasks/s':>8s}"
    )
    print(
        f"{out['worlds']:7d} {out['tasks_validated']:10d} {out['apps']:5d} {out['cross_app_share']:10.3f} "
        f"{report['rejected']:9d} {out['seconds']:8.0f} {out['tasks_per_s']:8.2f}"
    )
    print("splits:", out["by_split"], " rejections:", out["rejected_by_reason"] or "none")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
