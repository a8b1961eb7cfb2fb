"""Launch tooling for real: jobs submitted through launch/submit.sh to a throwaway Ray head, and a Hydra
multirun sweep of the eval CLI. tests/unit/test_launch_config.py checks the cluster-launcher example."""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import psutil
import pytest
import yaml

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, token: str, timeout_s: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} not up after {timeout_s} s")


def _stop_head(proc: subprocess.Popen[bytes], temp_dir: str) -> None:
    """Stops this head only. `ray stop` would kill every Ray on the machine (other tests run their own), so
    the blocking `ray start` gets SIGTERM and takes its processes down; whatever still runs from its process
    tree or names its temp dir is then killed by pid."""
    ours = set()
    try:
        ours = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
    except psutil.Error:
        pass
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.info["pid"] in ours or temp_dir in " ".join(p.info["cmdline"] or []):
            try:
                p.kill()
            except psutil.Error:
                pass


def _is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    return (getattr(addr, "ipv4_mapped", None) or addr).is_loopback  # ::ffff:127.0.0.1 is IPv4 loopback


class Head(NamedTuple):
    url: str  # the job server (dashboard)
    gcs_address: str
    token: str
    pid: int  # the blocking `ray start`, parent of the head's processes


@pytest.fixture(scope="module")
def ray_head() -> Iterator[Head]:
    """A throwaway single-node Ray head on loopback, shared by this module's jobs. Token auth is on, as by
    default, with its own token in the environment (never ~/.ray/auth_token, which other Rays use)."""
    # Ray's socket paths (TEMP/session_<date>_<pid>/sockets/plasma_store) must stay under the 107-byte limit
    # of a Unix socket path, so the temp dir is short: /tmp/rhXXXXXXXX, not pytest's tmp_path.
    temp_dir = tempfile.mkdtemp(prefix="rh", dir="/tmp")
    gcs_port, dash_port = _free_port(), _free_port()
    token = secrets.token_hex(16)
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    for k in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN_PATH"):
        env.pop(k, None)
    cmd = [
        str(VENV_BIN / "ray"),
        "start",
        "--head",
        "--block",  # the head lives as long as this process: its SIGTERM stops exactly this cluster
        "--node-ip-address=127.0.0.1",
        f"--port={gcs_port}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dash_port}",
        # fixed defaults another local Ray may hold: the client server's 10001 and the dashboard agent's 52365
        # (without its agent a head takes no jobs: "No available agent to submit job")
        f"--ray-client-server-port={_free_port()}",
        f"--dashboard-agent-listen-port={_free_port()}",
        "--num-cpus=2",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
    ]
    log_path = Path(temp_dir) / "ray_start.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{dash_port}"
    try:
        _wait_http(f"{url}/api/version", token, 90, proc, log_path)
        yield Head(url, f"127.0.0.1:{gcs_port}", token, proc.pid)
    finally:
        _stop_head(proc, temp_dir)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _submit(head: Head, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    drop = ("MAIGYM_PYTHON", "MAIGYM_CLIENT_PYTHON", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # submit.py's default auth mode (token), with the head's token
    env.update(RAY_ADDRESS=head.url, RAY_AUTH_TOKEN=head.token)
    # run from another directory: the script finds the checkout itself
    cmd = [str(ROOT / "launch" / "submit.sh"), *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def _sweep_seeds(sweep: Path) -> list[int]:
    """The seed each job of a 2-job sweep recorded, after checking its report."""
    seeds = []
    for num in (0, 1):
        job = sweep / str(num)  # Hydra's per-job runtime.output_dir: sweep.dir / sweep.subdir (job num)
        report = json.loads((job / "report.json").read_text())
        assert report["episodes"] == 1 and report["success_rate"] == 1.0
        seeds.append(yaml.safe_load((job / ".hydra" / "config.yaml").read_text())["policy"]["seed"])
    return seeds


SWEEP = (
    "experiment=debug",
    "policy.kind=golden",
    "tasks.limit=1",
    "concurrency=1",
    "env.pools.web.target_size=1",
    "env.pools.web.max_size=1",
    "wandb.mode=disabled",
    "policy.seed=1,2",
)


def test_submit_eval_job_to_a_local_head(ray_head, tmp_path):
    out = tmp_path / "job"
    proc = _submit(
        ray_head,
        tmp_path,
        "--submission-id=launch-test-eval",
        "maigym_ray.cli.eval",
        "experiment=debug",
        "policy.kind=golden",
        "tasks.limit=2",
        "concurrency=2",
        "env.pools.web.target_size=2",
        "env.pools.web.max_size=2",
        f"output_dir={out}",
        "wandb.mode=disabled",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert "launch-test-eval SUCCEEDED" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["episodes"] == 2 and report["success_rate"] == 1.0
    # the job's log (streamed to stdout): it ran the venv's python and joined the head, starting no Ray
    assert f"Running entrypoint for job launch-test-eval: {ROOT}/.venv/bin/python -m" in proc.stdout
    assert f"Connecting to existing Ray cluster at address: {ray_head.gcs_address}" in proc.stdout


def test_submit_a_multirun_sweep_as_one_job(ray_head, tmp_path):
    # `-m` first: submit.py puts ray.address=auto after it, where Hydra's parser accepts an override
    proc = _submit(
        ray_head,
        tmp_path,
        "--submission-id=launch-test-sweep",
        "maigym_ray.cli.eval",
        "-m",
        *SWEEP,
        f"hydra.sweep.dir={tmp_path}/sweep",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert _sweep_seeds(tmp_path / "sweep") == [1, 2]
    # both runs of the sweep used the head: the first joined it, the second found Ray initialised
    assert proc.stdout.count(f"Connecting to existing Ray cluster at address: {ray_head.gcs_address}") == 1


# last: by now the head also runs the workers the jobs left behind
def test_the_head_listens_on_loopback_only_and_requires_its_token(ray_head):
    tree = {ray_head.pid, *(p.pid for p in psutil.Process(ray_head.pid).children(recursive=True))}
    listening = [
        c.laddr
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in tree
    ]
    ports = {a.port for a in listening}
    assert {int(ray_head.gcs_address.rsplit(":", 1)[1]), int(ray_head.url.rsplit(":", 1)[1])} <= ports
    assert all(_is_loopback(a.ip) for a in listening), listening
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{ray_head.url}/api/jobs/", timeout=10)
    assert e.value.code == 401
