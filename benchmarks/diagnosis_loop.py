"""The diagnosis loop over rounds against a control arm that gets as many new tasks, drawn at random.

    python benchmarks/diagnosis_loop.py [--quick] [--json PATH] [--rounds N] [--new-tasks N] [--weakest K]
                                        [--apps a,b] [--model smollm2-135m|tiny-text] [--override KEY=VALUE ...]

Round r: evaluate the held-out tasks → cluster the failures by (app, screen, action) → synthesise tasks for the
weakest clusters (spec-derived, each validated live) → train on them (SFT on their golden solutions, by the
training job's own driver) → evaluate again. The control arm runs the same rounds from the same base checkpoint
with the same number of new tasks drawn at random from every cluster (runtime/diagnosis_loop.py). Both arms are
scored on the clusters the targeted arm aimed at in that round, and on every held-out task.

The job's config is ``cli.train``'s with ``experiment=smol`` (SmolLM2-135M-Instruct) or, with ``--model
tiny-text``, ``experiment=debug``; ``--override`` adds Hydra overrides. ``--quick`` runs one round on the tiny
model over one app: a smoke run of the plumbing, not a measurement.

JSON: ``rounds`` (each with ``targeted_success`` and ``control_success``: the targeted and the control arm's
held-out success on the clusters the targeted arm aimed at that round; ``targeted_overall`` and
``control_overall`` over every held-out task; each arm's record), ``base``, ``clusters``, ``all_targeted_clusters``,
``final_on_all_targeted``, ``rejected_by_reason``, ``wall_s``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)

ROOT = Path(__file__).resolve().parents[1]

#: per model: the experiment whose job config the loop runs on
EXPERIMENTS = {"smollm2-135m": "experiment=smol", "tiny-text": "experiment=debug"}
#: the loop's settings on every model: spec tasks type into fields (book, update, transfer) and their
#: replies run to about 20 tokens (``type(id="note", text="Booked by the agent")``)
#: the spec apps of the full run: those with clusters of at least 9 single-action tasks (3 held out, 2 base,
#: 4 or more to draw from); none is a novel app
FULL_APPS = ("photos", "news", "helpdesk", "flights", "cinema")
COMMON = [
    "policy.prompt.actions=[click,type,terminate]",
    "policy.sampling.max_tokens=24",
    "wandb.mode=disabled",
]


def job_config(model: str, overrides: list[str]) -> Any:
    """``cli.train``'s config for ``model`` with ``overrides``, as Hydra composes it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from maigym_ray.runtime.schema import register

    register()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[EXPERIMENTS[model], *COMMON, *overrides])
    return OmegaConf.to_object(cfg)


def fmt(v: float | None) -> str:
    """A rate, or n/a."""
    return "n/a" if v is None else f"{v:.2f}"


def table(out: dict[str, Any]) -> str:
    """Per round: the clusters aimed at, and both arms' held-out success on them and overall."""
    lines = [
        f"base: before {fmt(out['base']['before'])}, after SFT {fmt(out['base']['after_sft'])} "
        f"({out['heldout_tasks']} held-out tasks in {len(out['clusters'])} clusters)",
        f"{'round':>5s}  {'targeted clusters':44s} {'targeted arm':>14s} {'control arm':>14s}",
        f"{'':>5s}  {'':44s} {'aimed / all':>14s} {'aimed / all':>14s}",
    ]
    for rd in out["rounds"]:
        names = ", ".join("/".join(x) for x in rd["targeted_clusters"])
        lines.append(
            f"{rd['round']:5d}  {names[:44]:44s} "
            f"{fmt(rd['targeted_success']):>6s} / {fmt(rd['targeted_overall']):5s} "
            f"{fmt(rd['control_success']):>6s} / {fmt(rd['control_overall']):5s}"
        )
    fin = out["final_on_all_targeted"]
    lines.append(
        f"after the last round, on all {len(out['all_targeted_clusters'])} clusters ever targeted: "
        f"targeted {fmt(fin['targeted'])}, control {fmt(fin['control'])}"
    )
    lines.append(
        f"rejected new tasks by reason: {out['rejected_by_reason'] or 'none'}; wall {out['wall_s']:.0f} s"
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--model", choices=sorted(EXPERIMENTS), default="")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--new-tasks", type=int, default=0)
    ap.add_argument("--weakest", type=int, default=0)
    ap.add_argument("--base-steps", type=int, default=0)
    ap.add_argument("--round-steps", type=int, default=0)
    ap.add_argument("--apps", default="", help="comma-separated spec apps (default: the loop's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="run directory (default: a temporary one)")
    ap.add_argument("--override", action="append", default=[], help="a Hydra override of the job's config")
    args = ap.parse_args()

    from maigym_ray.runtime.diagnosis_loop import DiagnosisLoop, DiagnosisLoopConfig

    if args.quick:
        model = args.model or "tiny-text"
        loop = DiagnosisLoopConfig(
            apps=["photos"],
            heldout_per_cluster=1,
            min_reservoir=2,
            rounds=1,
            new_tasks=2,
            weakest=1,
            base_sft_steps=1,
            round_sft_steps=1,
        )
        overrides = ["env.pools.web.target_size=2", "env.pools.web.max_size=2", "driver.concurrency=2"]
    else:
        model = args.model or "smollm2-135m"
        loop = DiagnosisLoopConfig(apps=list(FULL_APPS))
        overrides = []
    changes = {
        "rounds": args.rounds,
        "new_tasks": args.new_tasks,
        "weakest": args.weakest,
        "base_sft_steps": args.base_steps,
        "round_sft_steps": args.round_steps,
    }
    fields = {**vars(loop), **{k: v for k, v in changes.items() if v}, "seed": args.seed}
    if args.apps:
        fields["apps"] = args.apps.split(",")
    loop = DiagnosisLoopConfig(**fields)
    cfg = job_config(model, [*overrides, *args.override])
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="diagnosis-loop-"))
    out = DiagnosisLoop(cfg, loop, root).run()
    out["quick"] = args.quick
    print(f"run directory: {root}")
    print(table(out))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
