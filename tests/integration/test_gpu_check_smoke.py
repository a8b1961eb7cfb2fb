"""benchmarks/gpu_check.py on the CPU at its smallest llama size: the path a lent GPU machine runs for the main
job's architecture (SmolLM2 shapes from its config, random weights), so it is exercised on every CI run. It
checks the JSON keys the GPU run reports: update tokens/s per packing, the weight hand-off and the generation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_the_llama_path_on_cpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "gpu_check.py"),
        "--device",
        "cpu",
        "--size",
        "tiny_llama",
    ]
    proc = subprocess.run([*cmd, "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["complete"] and r["size"] == "tiny_llama" and r["weights"].startswith("random")
    g = r["generate"]
    assert g["new_tokens"] > 0 and g["new_tokens_per_s"] > 0
    assert r["update_part_s"] > 0 and r["weight_part_s"] > 0
    assert "hand-off matches: True" in proc.stdout
