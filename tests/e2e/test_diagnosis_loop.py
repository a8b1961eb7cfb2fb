"""The diagnosis loop end to end at its smallest size (``benchmarks/diagnosis_loop.py --quick``: the tiny text
model on vLLM, one spec app on Chromium, the training job's own driver): a base round, then one round of each
arm from the same base checkpoint. It checks the loop's mechanics, not what it teaches (the tiny model reads
nothing): what each arm trained on, that no held-out task was trained on, and which weights each arm started
from. Also the benchmark smoke test of that script (tests/bench/ leaves it to this file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def _rows(d: Path, cols: list[str]) -> list[dict]:
    return [r for p in sorted(d.glob("*.parquet")) for r in pq.read_table(p, columns=cols).to_pylist()]


def test_the_loop_trains_each_arm_on_its_own_draw_from_the_same_base(tmp_path: Path) -> None:
    out, run = tmp_path / "loop.json", tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    cmd = [sys.executable, str(ROOT / "benchmarks" / "diagnosis_loop.py"), "--quick", "--json", str(out)]
    proc = subprocess.run(
        [*cmd, "--out", str(run)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=580
    )
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    got = json.loads(out.read_text())
    committed = json.loads((ROOT / "benchmarks" / "results" / "diagnosis_loop.json").read_text())
    assert set(committed) <= set(got), f"no longer writes {sorted(set(committed) - set(got))}"
    assert "targeted arm" in proc.stdout  # the table

    (rd,) = got["rounds"]
    for arm in ("targeted", "control"):
        assert 0.0 <= rd[f"{arm}_success"] <= 1.0 and 0.0 <= rd[f"{arm}_overall"] <= 1.0
        assert rd[f"{arm}_success"] == rd[arm]["targeted_clusters_after"]
        assert rd[arm]["new_tasks"] == 2
    aimed = {"/".join(c) for c in rd["targeted_clusters"]}
    assert len(aimed) == 1 and set(rd["targeted"]["new_by_cluster"]) == aimed
    assert (
        rd["control"]["clusters"] == rd["targeted_clusters"]
    )  # scored on the clusters the targeted arm aimed at

    # the base round skips the eval before training (heldout.before=false): no episodes, no figure
    assert not (run / "base" / "trajectories" / "eval-before").exists() and got["base"]["before"] is None
    assert set(got["base"]["failed_at"]) == {"navigate", "record", "action", "finish"}
    heldout = {r["task_id"] for r in _rows(run / "base" / "trajectories" / "eval-sft", ["task_id"])}
    assert len(heldout) == got["heldout_tasks"] == len(got["clusters"])
    versions = {}
    for d in (run / "base", run / "targeted" / "round-1", run / "control" / "round-1"):
        trained = {r["task_id"] for r in _rows(d / "trajectories" / "sft", ["task_id"])}
        assert trained and not trained & heldout, d
        assert not (d / "trajectories" / "eval-rl").exists()  # no GRPO round: the SFT eval is the last
        report = json.loads((d / "report.json").read_text())
        assert report["heldout_success_rl"] is None and report["rounds"] == 0
        versions[d.name if d.name == "base" else d.parent.name] = {
            r["policy_version"] for r in _rows(d / "trajectories" / "eval-sft", ["policy_version"])
        }
    # each arm resumed the base checkpoint's weights and trained once on top of them
    (base,) = versions["base"]
    assert versions["targeted"] == versions["control"] == {base + 1}
    arm_tasks = {
        arm: {r["task_id"] for r in _rows(run / arm / "round-1" / "trajectories" / "sft", ["task_id"])}
        for arm in ("targeted", "control")
    }
    assert all(len(v) == 2 for v in arm_tasks.values())
