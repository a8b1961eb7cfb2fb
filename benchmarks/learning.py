"""Does RL learn? The main job's recipe over seeds, verifier-only RL on novel apps, and two toy ablations.

    python benchmarks/learning.py [--model tiny-text|smollm2-135m] [--seeds N] [--quick] [--json out.json]
                                  [--only main,novel,miniwob,ablations,modes] [--override KEY=VALUE ...]

``--model`` picks the recipe (MODELS): ``tiny-text`` runs ``experiment=debug`` (and ``novel_apps``), the
random-init tiny model; ``smollm2-135m`` runs ``experiment=smol`` (and ``novel_apps_smol``), the pretrained
SmolLM2-135M-Instruct, and also measures the trainer's tokens/s in each trainer mode (``modes``:
benchmarks/trainer_modes.py).

Each run is ``python -m maigym_ray.cli.train`` in a subprocess (its own Ray, engines, Chromium), read back from
its ``report.json``:

- main: ``experiment=debug driver.seed=S`` (or the model's main experiment) for S in 0..N-1: held-out success after SFT and after RL on fresh
  instances of the task families (tasks/families.py), and the mean held-out steps;
- novel: ``experiment=novel_apps``: SFT on the training apps' families only, then RL from verifier rewards
  alone on the novel app's training instances; held out: fresh instances on the novel app;
- miniwob (models with a MiniWoB++ experiment): SFT on the scripted solutions of six MiniWoB++ tasks' training
  seeds, then RL on them; per task, held-out success on unseen seeds before training, after SFT and after RL
  (read from the run's stored eval trajectories), beside published figures where they exist (PUBLISHED);
- ablations, seed 0, the same budget: window-wise against step-wise history (update time per round and final
  held-out success), adaptive against uniform task sampling (zero-variance share and final held-out success).
  The window/adaptive arm is the main run of seed 0.

``--override`` (repeatable) adds a Hydra override to every run, e.g. to measure a setting before it becomes the
default; each run's ``command.txt`` records what it ran with.

``--quick`` shortens every run (fewer rounds, held-out episodes and SFT steps): a smoke run of the plumbing,
not a measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean
from typing import Any

from train_job import read_training, run_training

ROOT = Path(__file__).resolve().parents[1]
QUICK = [
    "driver.grpo.rounds=2",
    "driver.heldout.episodes_per_task=1",
    "driver.sft.steps=20",
    "tasks.family_heldout=4",
]


REUSE = False

#: per model: its main and novel-app experiments, and whether the trainer modes are measured on it
MODELS: dict[str, dict[str, Any]] = {
    "tiny-text": {
        "main": "experiment=debug",
        "novel": "experiment=novel_apps",
        "miniwob": "",  # it scores 0 on MiniWoB++ (docs/experiments/2026-12-01-tiny-models-miniwob.md)
        "modes": False,
    },
    "smollm2-135m": {
        "main": "experiment=smol",
        "novel": "experiment=novel_apps_smol",
        "miniwob": "experiment=miniwob_smol",
        "modes": True,
    },
}

#: Published per-task MiniWoB++ success of other agents on the tasks of experiment=miniwob_smol, by model, as
#: printed in AutoWebGLM (Lai et al., KDD 2024, arXiv:2404.03648v2), Appendix E, Table 8 (docs/suites/miniwob.md).
#: Table 8's columns (as printed), then its rows for these tasks in that column order.
_TABLE8_MODELS = ("AutoWebGLM-6B", "HTML-T5-XL", "WebN-T5-XL", "GPT-4")
_TABLE8 = {
    "click-button": (1.0, 1.0, 1.0, 0.67),
    "click-link": (1.0, 1.0, 0.99, 0.33),
    "click-dialog": (1.0, 1.0, 1.0, 0.33),
    "enter-text": (1.0, 1.0, 0.89, 0.67),
    "focus-text": (1.0, 1.0, 1.0, 0.0),
    "click-tab": (1.0, 1.0, 0.57, 0.0),
}
PUBLISHED: dict[str, dict[str, float]] = {
    m: {task: row[k] for task, row in _TABLE8.items()} for k, m in enumerate(_TABLE8_MODELS)
}

#: the held-out evals a training run stores (rl/driver.py), by the label the benchmark reports
EVALS = {"before": "eval-before", "sft": "eval-sft", "rl": "eval-rl"}


def train(overrides: list[str], out: Path, timeout: int = 3600) -> dict[str, Any]:
    """One training run; its report plus the wall time (with ``--reuse``, a finished run found at ``out`` is read
    back instead: its ``command.txt`` holds the overrides it ran with)."""
    return (REUSE and read_training(out)) or run_training(overrides, out, timeout)


def _zero_var(r: dict[str, Any]) -> float:
    h = r.get("history", [])
    return mean(x.get("zero_var_share", 0.0) for x in h) if h else 0.0


def _update_s(r: dict[str, Any]) -> float:
    h = r.get("history", [])
    return mean(x.get("update_s", 0.0) for x in h) if h else 0.0


def per_task(run_dir: Path) -> dict[str, dict[str, float | None]]:
    """Held-out success per MiniWoB++ task (``miniwob.<name>.<seed>``) in each stored eval of a run; an eval
    with no scored episode of a task gives None (infra-failed episodes are not scored)."""
    from maigym_ray.harness.trajectory_store import load_trajectories

    out: dict[str, dict[str, float | None]] = {}
    for label, name in EVALS.items():
        wins: dict[str, list[float]] = {}
        for t in load_trajectories(run_dir / "trajectories" / name):
            task = t.task_id.split(".")[1] if t.task_id.count(".") == 2 else t.task_id
            wins.setdefault(task, [])
            if not t.infra_failed:
                wins[task].append(float(t.reward.success))
        for task, w in wins.items():
            out.setdefault(task, {})[label] = mean(w) if w else None
    return out


def _short(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("heldout_success_before", "heldout_success_sft", "heldout_success_rl")
    steps = ("heldout_mean_steps_sft", "heldout_mean_steps_rl")
    return {**{k: r.get(k) for k in (*keys, *steps)}, "seconds": r.get("wall_s"), "command": r.get("command")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny-text", choices=sorted(MODELS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--only",
        default="main,novel,miniwob,ablations,modes",
        help="comma list of main, novel, miniwob, ablations, modes",
    )
    ap.add_argument("--workdir", default="", help="where the runs go (default: a temp dir)")
    ap.add_argument("--reuse", action="store_true", help="read back runs already finished in --workdir")
    ap.add_argument(
        "--override", action="append", default=[], help="a Hydra override for every run (repeatable)"
    )
    args = ap.parse_args()
    global REUSE
    REUSE = args.reuse
    parts = set(args.only.split(","))
    recipe = MODELS[args.model]
    main_exp = recipe["main"]
    t_start = time.perf_counter()
    extra = [*(QUICK if args.quick else []), *args.override]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="learning-bench-"))
    # Parts left out (--only) stay in the JSON as nulls, so a reader sees they were not run.
    out: dict[str, Any] = {
        "model": args.model,
        "seeds": 0,
        "quick": args.quick,
        "novel_apps": dict.fromkeys(("before", "after", "steps_before", "steps_after")),
        # MiniWoB++ per task (before, SFT, RL); null when the part is not run or the model has no such experiment
        "miniwob": None,
        "ablations": dict.fromkeys(
            (
                "window_vs_step_update_s",
                "window_vs_step_heldout",
                "adaptive_vs_uniform_zero_var_share",
                "adaptive_vs_uniform_heldout",
            )
        ),
    }

    runs: list[dict[str, Any]] = []
    if "main" in parts or "ablations" in parts:
        for s in range(args.seeds if "main" in parts else 1):
            runs.append(train([main_exp, f"driver.seed={s}", *extra], work / f"main-{s}"))
            print(f"seed {s}: {json.dumps(_short(runs[-1]))}", flush=True)
    if "main" in parts:
        sft = [r["heldout_success_sft"] for r in runs]
        rl = [r["heldout_success_rl"] for r in runs]
        lifts = [b - a for a, b in zip(sft, rl, strict=True)]
        out.update(
            seeds=len(runs),
            sft_mean=mean(sft),
            rl_mean=mean(rl),
            lift_mean=mean(lifts),
            lift_min=min(lifts),
            steps_sft_mean=mean(r["heldout_mean_steps_sft"] for r in runs),
            steps_rl_mean=mean(r["heldout_mean_steps_rl"] for r in runs),
            runs=[_short(r) for r in runs],
        )
    if "novel" in parts:
        r = train([recipe["novel"], *extra], work / "novel")
        out["novel_apps"] = {
            "before": r["heldout_success_sft"],
            "after": r["heldout_success_rl"],
            "steps_before": r["heldout_mean_steps_sft"],
            "steps_after": r["heldout_mean_steps_rl"],
            "reference": {"before": 0.258, "after": 0.452, "steps_before": 33.3, "steps_after": 16.4},
            "run": _short(r),
        }
    if "miniwob" in parts and recipe["miniwob"]:
        r = train([recipe["miniwob"], *extra], work / "miniwob")
        tasks = per_task(work / "miniwob")
        for name, row in tasks.items():
            row["published"] = {m: v[name] for m, v in PUBLISHED.items() if name in v}
        out["miniwob"] = tasks  # per task: before, sft, rl, published
        out["miniwob_run"] = _short(r)  # the whole run's held-out figures (every task's episodes together)
    if "ablations" in parts:
        base = runs[0]
        step = train([main_exp, "policy.history.strategy=step", *extra], work / "step")
        uniform = train([main_exp, "sampler.mode=uniform", *extra], work / "uniform")
        out["ablations"] = {
            "window_vs_step_update_s": {"window": _update_s(base), "step": _update_s(step)},
            "window_vs_step_heldout": {
                "window": base["heldout_success_rl"],
                "step": step["heldout_success_rl"],
            },
            "adaptive_vs_uniform_zero_var_share": {
                "adaptive": _zero_var(base),
                "uniform": _zero_var(uniform),
            },
            "adaptive_vs_uniform_heldout": {
                "adaptive": base["heldout_success_rl"],
                "uniform": uniform["heldout_success_rl"],
            },
            "runs": {"step": _short(step), "uniform": _short(uniform)},
        }

    if "modes" in parts and recipe["modes"]:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from trainer_modes import measure

        out["train_tokens_per_s"] = measure(args.model, args.quick)
    out["wall_s"] = time.perf_counter() - t_start

    print(f"{'figure':34s} value")
    for k in ("seeds", "sft_mean", "rl_mean", "lift_mean", "lift_min", "steps_sft_mean", "steps_rl_mean"):
        if k in out:
            print(f"{k:34s} {out[k]}")
    if "novel" in parts:
        n = out["novel_apps"]
        print(f"{'novel apps success before -> after':34s} {n['before']} -> {n['after']}")
        print(f"{'novel apps steps before -> after':34s} {n['steps_before']} -> {n['steps_after']}")
    if out["miniwob"]:
        print(f"{'miniwob task':34s} before / SFT / RL")
        for name, row in sorted(out["miniwob"].items()):
            print(f"{name:34s} {row.get('before')} / {row.get('sft')} / {row.get('rl')}")
        m = out["miniwob_run"]
        print(
            f"{'miniwob, all episodes':34s} {m['heldout_success_before']} / {m['heldout_success_sft']} / "
            f"{m['heldout_success_rl']}"
        )
    for k, v in out["ablations"].items():
        if k != "runs":
            print(f"{k:34s} {v}")
    if "train_tokens_per_s" in out:
        print(f"{'train_tokens_per_s':34s} {out['train_tokens_per_s']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
