"""The GPU placement smoke (benchmarks/gpu_placement_check.py, run by benchmarks/gpu_check.sh on a lent GPU
machine) in its CPU dry mode: the same path (topology -> Placement -> TrainerGroup -> bucketed broadcast to a
receiver) with no GPU, so the script is exercised on every CI run and not only when a device is lent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_placement_check_runs_dry_on_cpu(tmp_path):
    out = tmp_path / "gpu_placement.json"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "gpu_placement_check.py"),
        "--dry-run",
        "--json",
        str(out),
    ]
    # a Ray of its own (a local one, on loopback), whatever cluster this process may be pointed at
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["complete"] and r["dry_run"] and r["gpus"] == 0
    # placed by the topology: one trainer rank with no GPU to ask for, weights over gloo
    assert r["trainer_options"]["num_gpus"] == 0 and r["backend"] == "gloo"
    assert r["trainer"]["device"] == "cpu" and not r["trainer_on_cuda"]
    assert r["update"]["tokens"] > 0  # one real optimizer step
    assert r["buckets"] > 1 and r["weights_identical"] and r["sync_gbps"] > 0
