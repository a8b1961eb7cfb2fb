"""A third-party app package (examples/tally_app) evaluated through cli.eval without editing the package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tally_app"


def test_user_app_by_class_path_evaluates_through_cli_eval(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(EXAMPLE)])}
    common = [
        sys.executable,
        "-m",
        "maigym_ray.cli.eval",
        "experiment=debug",
        "wandb.mode=offline",
        "env.apps=[notes,'maigym_tally.app:TallyApp']",
        f"tasks.pool={EXAMPLE / 'tasks.jsonl'}",
        "env.pools.web.target_size=1",
        "concurrency=1",
    ]
    runs = {}
    for kind in ("golden", "random"):
        out = tmp_path / kind
        cmd = [*common, f"policy.kind={kind}", f"output_dir={out}", f"hydra.run.dir={out}/hydra"]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[kind] = {r["task_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert set(runs["golden"]) == {"tally-up-to-three", "tally-down-to-two"}
    assert all(r["success"] and not r["infra_failed"] for r in runs["golden"].values())
    # the verifier reads the app's state: the random policy does not score by replaying nothing
    assert not all(r["success"] for r in runs["random"].values())
