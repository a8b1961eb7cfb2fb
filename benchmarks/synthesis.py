"""Apps from specs: how many apps, how many spec-derived tasks pass live validation, and why the rest fail.

    python benchmarks/synthesis.py [--quick] [--apps N] [--json PATH] [--concurrency C] [--cross-app N]

Derives every task kind from the shipped spec apps (``maigym_ray/synth/spec_suite.py``: single-action,
multi-step chains, search-then-act, create-then-act, find-and-answer, counts, and cross-app tasks whose evidence
is in one app and whose change is in another), then validates each on a live Chromium instance through the
EnvManager, exactly as ``cli.synth`` does (initial state scores 0, golden scores 1, a reset restores the state
hash). ``--quick`` uses the first 8 spec apps (or ``--apps N``) and small sizes (``spec_suite.QUICK``); the full
run uses every spec app and ``spec_suite.FULL``. ``cross_app_share`` is the share of *validated* tasks that
touch two apps; ``by_kind`` gives candidates and validated tasks per kind; ``tasks_per_s`` the validation rate.
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
from maigym_ray.synth.spec_suite import FULL, QUICK, derive_spec_tasks, kind_of
from maigym_ray.tasks.pool import TaskPool


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--apps", type=int, default=0, help="validate on the first N spec apps (default: 8 quick, all)")
    ap.add_argument("--json", default="")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--per-action", type=int, default=0, help="records per action (default: the sizes')")
    ap.add_argument("--cross-app", type=int, default=-1, help="cross-app tasks in all (default: 40%% of the rest)")
    ap.add_argument("--derive-only", action="store_true", help="derive and count the candidates; no browser")
    args = ap.parse_args()
    t0 = time.perf_counter()
    apps = SPEC_APPS[: args.apps or (8 if args.quick else len(SPEC_APPS))]
    sizes = QUICK if args.quick else FULL
    if args.per_action:
        sizes = replace(sizes, per_action=args.per_action)
    single = derive_spec_tasks(apps, sizes)
    # cross-app tasks sized so they are about 0.4 of all candidates (the issue asks for a share >= 0.3 validated)
    n_cross = args.cross_app if args.cross_app >= 0 else round(len(single) * 2 / 3)
    records = derive_spec_tasks(apps, replace(sizes, cross_app=n_cross)) if n_cross else single
    derive_s = time.perf_counter() - t0
    path = Path(tempfile.mkdtemp(prefix="maigym_spec_tasks_")) / "tasks.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in records))
    tasks = list(TaskPool.load(path))
    candidates = Counter(kind_of(t) for t in tasks)
    if args.derive_only:
        print(json.dumps({"candidate_tasks": len(tasks), "by_kind": dict(candidates), "derive_s": derive_s}))
        return 0
    cfg = SynthConfig(concurrency=args.concurrency)
    cfg = replace(cfg, env=replace(cfg.env, apps=list(apps)))
    t1 = time.perf_counter()
    verdicts, _ = asyncio.run(validate_live(cfg, tasks, desc="validate spec tasks"))
    validate_s = time.perf_counter() - t1
    by_id = {t.id: t for t in tasks}
    ok = [by_id[v.task_id] for v in verdicts if v.ok]
    valid = Counter(kind_of(t) for t in ok)
    out = {
        "apps": len(APP_CLASSES),
        "spec_apps": len(SPEC_APPS),
        "apps_validated_on": len(apps),
        "apps_with_validated_tasks": len({a for t in ok for a in t.apps}),
        "candidate_tasks": len(tasks),
        "validated_tasks": len(ok),
        "cross_app_share": round(sum(len(t.apps) >= 2 for t in ok) / len(ok), 3) if ok else 0.0,
        "by_kind": {k: {"candidates": n, "validated": valid[k]} for k, n in sorted(candidates.items())},
        "wall_s": round(time.perf_counter() - t0, 1),
        "derive_s": round(derive_s, 1),
        "validate_s": round(validate_s, 1),
        "tasks_per_s": round(len(tasks) / validate_s, 2),
        "rejected_by_reason": dict(Counter(v.reason for v in verdicts if not v.ok)),
        "novel_split_apps": len(NOVEL_APPS),
        "concurrency": args.concurrency,
    }
    print(f"{'figure':26s} value")
    for k, v in out.items():
        print(f"{k:26s} {v}")
    for v in verdicts:
        if not v.ok:
            print(f"  rejected {v.task_id}: {v.reason}: {v.detail[:160]}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
