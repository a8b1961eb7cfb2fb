"""Apps from specs: how many apps, how many spec-derived tasks pass live validation, and why the rest fail.

    python benchmarks/synthesis.py [--quick] [--apps N] [--json PATH] [--concurrency C] [--cross-ratio R] [--skip N]

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
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from maigym_ray.apps.registry import APP_CLASSES, NOVEL_APPS, SPEC_APPS
from maigym_ray.errors import TaskError
from maigym_ray.runtime.schema import SynthConfig
from maigym_ray.runtime.synthesis import validate_live
from maigym_ray.synth.spec_suite import FULL, QUICK, derive_with_cross_share, kind_of
from maigym_ray.tasks.pool import task_from_dict

#: cross-app candidates per single-app candidate: a third of all candidates (the issue asks >= 0.3 validated)
CROSS_RATIO = 0.5


def cost_model(verdicts: list, by_id: dict, validate_s: float, concurrency: int, apps: tuple) -> dict:
    """Seconds per task = ``per_task_s`` + ``per_action_s`` x golden actions, fitted (least squares) over this
    run's verdicts, and what it predicts for the full run (every spec app, ``FULL`` sizes) at the same
    concurrency: ``sum(predicted seconds) / concurrency`` plus this run's start-up overhead."""
    xs = [len(by_id[v.task_id].golden) for v in verdicts]
    ys = [v.seconds for v in verdicts]
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        return {}
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    startup = max(0.0, validate_s - sum(ys) / concurrency)
    full = derive_with_cross_share(SPEC_APPS, FULL, CROSS_RATIO)
    busy = sum(a + b * len(t["golden"]) for t in full) / concurrency
    return {
        "fit_s": {"per_task_s": round(a, 3), "per_action_s": round(b, 3), "startup_s": round(startup, 1)},
        "full_run_estimate": {
            "candidate_tasks": len(full),
            "golden_actions": sum(len(t["golden"]) for t in full),
            "wall_s": round(busy + startup, 0),
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--apps", type=int, default=0, help="validate on the first N spec apps (default: 8 quick, all)"
    )
    ap.add_argument("--json", default="")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--per-action", type=int, default=0, help="records per action (default: the sizes')")
    ap.add_argument(
        "--cross-ratio", type=float, default=CROSS_RATIO, help="cross-app per single-app candidate"
    )
    ap.add_argument("--skip", type=int, default=0, help="leave out the first N spec apps (validate others)")
    ap.add_argument("--derive-only", action="store_true", help="derive and count the candidates; no browser")
    args = ap.parse_args()
    t0 = time.perf_counter()
    apps = SPEC_APPS[args.skip :][: args.apps or (8 if args.quick else len(SPEC_APPS))]
    sizes = QUICK if args.quick else FULL
    if args.per_action:
        sizes = replace(sizes, per_action=args.per_action)
    records = derive_with_cross_share(apps, sizes, args.cross_ratio)
    derive_s = time.perf_counter() - t0
    # each record goes through the task-file check a pool applies; one that fails it is a rejection, not a crash
    tasks, bad = [], Counter()
    for i, rec in enumerate(records):
        try:
            tasks.append(task_from_dict(json.loads(json.dumps(rec)), f"derived task {i} ({rec['id']})"))
        except TaskError as exc:
            bad["bad_task"] += 1
            print(f"  rejected {rec['id']}: bad_task: {exc}")
    candidates = Counter(kind_of(t) for t in tasks)
    if args.derive_only:
        print(
            json.dumps(
                {
                    "candidate_tasks": len(records),
                    "bad_task": sum(bad.values()),
                    "by_kind": dict(candidates),
                    "derive_s": derive_s,
                }
            )
        )
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
        "candidate_tasks": len(records),
        "validated_tasks": len(ok),
        "cross_app_share": round(sum(len(t.apps) >= 2 for t in ok) / len(ok), 3) if ok else 0.0,
        "by_kind": {k: {"candidates": n, "validated": valid[k]} for k, n in sorted(candidates.items())},
        "validated_by_split": dict(Counter(t.split for t in ok)),
        "wall_s": round(time.perf_counter() - t0, 1),
        "derive_s": round(derive_s, 1),
        "validate_s": round(validate_s, 1),
        "tasks_per_s": round(len(tasks) / validate_s, 2),
        "rejected_by_reason": dict(Counter(v.reason for v in verdicts if not v.ok) + bad),
        "novel_split_apps": len(NOVEL_APPS),
        "concurrency": args.concurrency,
        **cost_model(verdicts, by_id, validate_s, args.concurrency, apps),
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
