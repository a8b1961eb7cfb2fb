"""The benchmark smoke tier: every script in benchmarks/ runs at its smallest size and writes the JSON keys its
committed result (benchmarks/results/, read by benchmarks/report.py and the docs) has, so no benchmark rots
unseen. Each runs as its user runs it, a subprocess; ``--durations`` in CI's log gives each one's cost.

Covered elsewhere: ``gpu_check.py`` (tests/integration/test_gpu_check_smoke.py), ``gpu_placement_check.py``
(tests/integration/test_gpu_placement_dry.py), ``report.py`` (tests/unit/test_docs.py), ``diagnosis_loop.py``
(tests/e2e/test_diagnosis_loop.py). ``browsergym_peer.py`` runs inside ``vs_browsergym.py``, and ``train_job.py`` is
the helper that ``learning.py`` and ``async_rl.py`` run their jobs with. Heavy ones carry ``heavy`` (see HEAVY) and run when
``MAIGYM_BENCH_HEAVY=1``: they need vLLM, a downloaded peer venv or minutes of training.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

#: benchmark id -> (script and its smallest arguments, the committed result whose keys it must write, keys
#: the small run leaves out on purpose).
SMOKE: dict[str, tuple[list[str], str, set[str]]] = {
    "sampler": (["sampler.py", "--quick"], "sampler.json", set()),
    "update_time": (["update_time.py", "--quick"], "update_time.json", set()),
    "weight_sync": (["weight_sync.py", "--quick"], "weight_sync.json", set()),
    "scale_sim": (
        ["scale_sim.py", "--quick", "--instances", "1000", "--actors", "4", "--leases", "50"],
        "scale_sim.json",
        set(),
    ),
    "scale_sim_async": (["scale_sim.py", "--async", "--quick"], "scale_sim_async.json", set()),
    "env_ops_web": (["env_ops.py", "--backend", "web", "--quick"], "env_ops_web.json", set()),
    "env_ops_desktop": (["env_ops.py", "--backend", "desktop", "--quick"], "env_ops_desktop.json", set()),
    "synth": (["synth.py", "--quick", "--worlds", "1", "--concurrency", "2"], "synth.json", set()),
    "synthesis": (["synthesis.py", "--quick", "--apps", "2"], "synthesis.json", set()),
    "soak": (
        ["soak.py", "--minutes", "0.15", "--chaos-every-s", "4", "--backend", "fake", "--batch", "4"],
        "soak.json",
        set(),
    ),
    "miniwob_scripted": (["miniwob_scripted.py", "--quick", "--instances", "1"], "", set()),
}

#: Too heavy for every CI run on 2 cores (or needing what CI lacks): run with MAIGYM_BENCH_HEAVY=1.
HEAVY: dict[str, tuple[list[str], str, set[str]]] = {
    "prefix_cache": (["prefix_cache.py", "--quick"], "prefix_cache.json", set()),  # vLLM engines
    "learning": (["learning.py", "--quick", "--seeds", "1"], "learning.json", set()),  # training runs
    "async_rl": (["async_rl.py", "--quick"], "async_rl.json", set()),  # two training runs
    "trainer_modes": (["trainer_modes.py", "--quick"], "", set()),  # SmolLM2 135M, > 1.5 GB
    "vs_browsergym": (["vs_browsergym.py", "--quick"], "vs_browsergym.json", set()),  # a PyPI venv
}

#: Keys of benchmarks without a committed result.
KEYS = {
    "miniwob_scripted": {
        "success_by_task",
        "tasks_at_95",
        "tasks",
        "seeds",
        "episodes",
        "seconds",
        "episodes_per_s",
        "infra_failed",
    },
    "trainer_modes": {"model", "quick", "train_tokens_per_s", "cpu_capability", "wall_s"},
}


def _run(name: str, spec: tuple[list[str], str, set[str]], tmp_path: Path) -> None:
    (script, *args), result, left_out = spec
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args, "--json", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    got = json.loads(out.read_text())
    want = (set(json.loads((RESULTS / result).read_text())) if result else KEYS[name]) - left_out
    assert want <= set(got), f"{name} no longer writes {sorted(want - set(got))}"
    print(f"[bench smoke] {name}: {seconds:.1f} s")


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_benchmark_runs_small_and_writes_its_keys(name: str, tmp_path: Path) -> None:
    _run(name, SMOKE[name], tmp_path)


@pytest.mark.heavy
@pytest.mark.skipif(os.environ.get("MAIGYM_BENCH_HEAVY") != "1", reason="heavy: set MAIGYM_BENCH_HEAVY=1")
@pytest.mark.parametrize("name", sorted(HEAVY))
def test_heavy_benchmark_runs_small_and_writes_its_keys(name: str, tmp_path: Path) -> None:
    _run(name, HEAVY[name], tmp_path)


#: Starts a loopback cluster of three nodes, so it runs in scripts/test.sh's multi-node pytest process.
MULTINODE = (["multinode.py", "--quick"], "multinode.json", set())


@pytest.mark.multinode
def test_multinode_benchmark_runs_small_and_writes_its_keys(tmp_path: Path) -> None:
    _run("multinode", MULTINODE, tmp_path)


def test_every_benchmark_script_has_a_smoke_test() -> None:
    covered = {spec[0][0] for spec in (*SMOKE.values(), *HEAVY.values(), MULTINODE)}
    # diagnosis_loop.py: tests/e2e/test_diagnosis_loop.py runs it --quick and checks its keys and its runs
    elsewhere = {
        "gpu_check.py",
        "gpu_placement_check.py",
        "report.py",
        "browsergym_peer.py",
        "diagnosis_loop.py",
        "train_job.py",  # the helper learning.py and async_rl.py run their training jobs with
    }
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    assert scripts - elsewhere - covered == set(), "a benchmark without a smoke test"
