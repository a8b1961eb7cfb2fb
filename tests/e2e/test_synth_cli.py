"""cli.synth -> cli.eval -> cli.diagnose end to end: a pool is synthesised and validated live, a random policy
fails on it, and the diagnosis loop writes the next pool version with new tasks for the weakest groups."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from maigym_ray.tasks.pool import TaskPool

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _cli(module: str, *overrides: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", f"maigym_ray.cli.{module}", *overrides]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_synth_eval_diagnose_loop(tmp_path):
    pool_dir = tmp_path / "pool"
    proc = _cli(
        "synth",
        "worlds=2",
        "templates=[notes_pin,mail_time,x_mail_to_notes,plants_water]",
        "concurrency=2",
        "env.pools.web.target_size=2",
        f"output_dir={pool_dir}",
        f"hydra.run.dir={tmp_path}/hydra-synth",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rejection rate 0.000" in proc.stdout and "tasks=8 validated=8" in proc.stdout
    report = json.loads((pool_dir / "synth_report.json").read_text())
    assert report["by_split"] == {"test": 3, "train": 3, "ood_app": 2}  # world 0 held out; plants is novel
    assert "template" in (pool_dir / "summary.txt").read_text()

    run = tmp_path / "eval"
    proc = _cli(
        "eval",
        "experiment=debug",
        f"tasks.pool={pool_dir / 'pool.parquet'}",
        "policy.kind=random",
        "episodes_per_task=2",
        "concurrency=2",
        "env.pools.web.target_size=2",
        "wandb.mode=disabled",
        f"output_dir={run}",
        f"hydra.run.dir={tmp_path}/hydra-eval",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_split = json.loads((run / "report.json").read_text())["by_split"]
    assert set(by_split) == {"train", "test", "ood_app"}
    assert {s: v["episodes"] for s, v in by_split.items()} == {"train": 6, "test": 6, "ood_app": 4}
    table = (run / "success_table.txt").read_text()
    assert "ood_app" in table and "split" in table

    proc = _cli(
        "diagnose",
        f"results={run / 'results.parquet'}",
        f"pool={pool_dir / 'pool.parquet'}",
        "weakest=2",
        "worlds=1",
        "synth.concurrency=2",
        "synth.env.pools.web.target_size=2",
        f"hydra.run.dir={tmp_path}/hydra-diag",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wrong_screen" in proc.stdout  # the failure table
    diag = json.loads((pool_dir / "pool_v2.diagnosis.json").read_text())
    assert len(diag["weakest"]) == 2 and diag["new_worlds"] == [2] and diag["new_tasks"] >= 2
    v2 = TaskPool.load(pool_dir / "pool_v2.parquet")
    old = {t.id for t in TaskPool.load(pool_dir / "pool.parquet")}
    new = [t for t in v2 if t.id not in old]
    assert old < {t.id for t in v2} and len(new) == diag["new_tasks"]
    assert {t.tags[0].split(":")[1] for t in new} == set(diag["templates"])
    assert all("world:2" in t.tags for t in new)
    rows = pq.read_table(run / "results.parquet").to_pylist()
    assert len(rows) == 16 and not all(r["success"] for r in rows)
