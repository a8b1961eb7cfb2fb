"""Apps from specs: how many apps, how many spec-derived tasks pass live validation, and why the rest fail.

    python benchmarks/synthesis.py [--quick] [--json PATH] [--concurrency C] [--apps N]

Derives single-action tasks from every shipped spec app (``maigym_ray/synth/spec_tasks.py``: golden from the
screens, verifier from the action's declared effect), then validates each on a live Chromium instance through
the EnvManager, exactly as ``cli.synth`` does (initial state scores 0, golden scores 1, a reset restores the
state hash). ``--quick`` takes the first 8 spec apps and one record per action; the full run every spec app and
up to 3 records per action; ``--apps N`` keeps the first N of those (the CI smoke run takes 2). Multi-step, find-and-answer and cross-app tasks from specs
are not derived yet: ``cross_app_share`` is reported as it is (0.0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from maigym_ray.apps.registry import APP_CLASSES, NOVEL_APPS, SPEC_APPS
from maigym_ray.runtime.schema import SynthConfig
from maigym_ray.runtime.synthesis import validate_live
from maigym_ray.synth.spec_tasks import single_action_tasks
from maigym_ray.tasks.pool import TaskPool


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--per-action", type=int, default=0, help="records per action (default: 1 quick, 3 full)")
    ap.add_argument(
        "--apps", type=int, default=0, help="validate on the first N spec apps only (0: as --quick says)"
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    apps = SPEC_APPS[:8] if args.quick else SPEC_APPS
    if args.apps < 0:
        ap.error("--apps must be >= 0")
    apps = apps[: args.apps] if args.apps else apps
    per_action = args.per_action or (1 if args.quick else 3)
    path = Path(tempfile.mkdtemp(prefix="maigym_spec_tasks_")) / "tasks.jsonl"
    with path.open("w") as f:
        for app in apps:
            for t in single_action_tasks(APP_CLASSES[app].SPEC, APP_CLASSES[app]().state(), per_action):
                f.write(json.dumps(t) + "\n")
    tasks = list(TaskPool.load(path))
    cfg = SynthConfig(concurrency=args.concurrency)
    cfg = replace(cfg, env=replace(cfg.env, apps=list(apps)))
    verdicts, _ = asyncio.run(validate_live(cfg, tasks, desc="validate spec tasks"))
    reasons = Counter(v.reason for v in verdicts if not v.ok)
    ok = [v for v in verdicts if v.ok]
    out = {
        "apps": len(APP_CLASSES),
        "spec_apps": len(SPEC_APPS),
        "apps_validated_on": len(apps),
        "candidate_tasks": len(tasks),
        "validated_tasks": len(ok),
        "cross_app_share": 0.0,
        "wall_s": round(time.perf_counter() - t0, 1),
        "rejected_by_reason": dict(reasons),
        "novel_split_apps": len(NOVEL_APPS),
    }
    print(f"{'figure':22s} value")
    for k, v in out.items():
        print(f"{k:22s} {v}")
    for v in verdicts:
        if not v.ok:
            print(f"  rejected {v.task_id}: {v.reason}: {v.detail[:160]}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
