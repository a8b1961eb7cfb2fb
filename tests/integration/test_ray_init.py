"""Starting a local Ray (runtime/ray_init.py): ``ray.address=""`` gets a Ray of its own whatever else runs on
the machine, and a run inside a cluster's environment that forgot ``ray.address=auto`` is told so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

_START = """
import ray
from maigym_ray.config import RayConfig
from maigym_ray.runtime.ray_init import init_ray
init_ray(RayConfig(num_cpus=1, object_store_mb=128))
print("CPU", ray.cluster_resources()["CPU"], ray.get_runtime_context().gcs_address)
ray.shutdown()
"""


def test_a_stale_cluster_address_file_does_not_capture_a_local_run():
    """Any head on the machine (`ray start`, ray.cluster_utils) records its address in
    RAY_TMPDIR/ray/ray_current_cluster, and a killed one leaves the file behind. A bare ray.init() would try to
    join it and fail; a local run starts its own Ray instead."""
    # short: Ray's Unix socket paths below it must fit in 107 bytes
    tmp = tempfile.mkdtemp(prefix="ri", dir="/tmp")
    try:
        (Path(tmp) / "ray").mkdir()
        (Path(tmp) / "ray" / "ray_current_cluster").write_text("127.0.0.1:1")  # nobody listens there
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
        env["RAY_TMPDIR"] = tmp
        proc = subprocess.run(
            [sys.executable, "-c", _START], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        line = next(x for x in proc.stdout.splitlines() if x.startswith("CPU "))
        _, cpus, gcs = line.split()
        assert float(cpus) == 1.0  # its own Ray, with the CPUs it asked for
        assert gcs.startswith("127.0.0.1:") and gcs != "127.0.0.1:1"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_an_empty_address_under_a_cluster_s_ray_address_is_a_config_error():
    """Inside `ray job submit` RAY_ADDRESS names the cluster; a run left at ray.address="" would otherwise start a
    private Ray beside it. It stops with a ConfigError that names the fix, before any Ray starts."""
    env = {**os.environ, "RAY_ADDRESS": "http://10.0.0.5:8265"}
    proc = subprocess.run(
        [sys.executable, "-c", _START], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0 and "CPU " not in proc.stdout
    assert "ConfigError" in proc.stderr and "pass ray.address=auto" in proc.stderr, proc.stderr[-2000:]
