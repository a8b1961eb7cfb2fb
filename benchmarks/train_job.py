"""The benchmarks' helper (not a benchmark itself): a training job as its own process: ``python -m maigym_ray.cli.train OVERRIDES output_dir=OUT``, with its own
Ray, engines and pools, read back from the ``report.json`` it writes. The benchmarks that compare training runs
(benchmarks/learning.py, benchmarks/async_rl.py) run every arm this way, as a user runs it, so no arm shares a
warm engine or a page cache with another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_training(overrides: list[str], out: Path, timeout: int = 3600) -> dict[str, Any]:
    """Runs one job into ``out`` (its log beside it, ``OUT.log``); returns its report with ``wall_s`` and the
    ``command`` (also written to ``out/command.txt``). A job that fails raises, naming its log."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "maigym_ray.cli.train",
        *overrides,
        f"output_dir={out}",
        "wandb.mode=disabled",
    ]
    t0 = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "w") as log:
        rc = subprocess.run(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout
        ).returncode
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {rc}; see {out.parent / (out.name + '.log')}")
    report = json.loads((out / "report.json").read_text())
    report["wall_s"] = time.perf_counter() - t0
    report["command"] = "python -m maigym_ray.cli.train " + " ".join(overrides)
    (out / "command.txt").write_text(report["command"] + "\n")
    return report


def read_training(out: Path) -> dict[str, Any] | None:
    """A finished job's report read back from ``out`` (``wall_s`` from its own seconds, ``command`` from
    ``command.txt``); None when it has no report."""
    if not (out / "report.json").exists():
        return None
    report = json.loads((out / "report.json").read_text())
    report["wall_s"] = report.get("seconds")
    report["command"] = (out / "command.txt").read_text().strip() if (out / "command.txt").exists() else ""
    return report
