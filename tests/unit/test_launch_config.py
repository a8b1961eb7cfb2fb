"""launch/: the cluster-launcher example is a config Ray's launcher accepts, and submit.py builds the job."""

from __future__ import annotations

import copy
import shlex
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
REQUIRED = (
    "cluster_name",
    "provider",
    "available_node_types",
    "head_node_type",
    "head_start_ray_commands",
    "worker_start_ray_commands",
)


@pytest.fixture(scope="module")
def cluster() -> dict:
    return yaml.safe_load((ROOT / "launch" / "cluster.yaml").read_text())


@pytest.fixture(scope="module")
def submit(load_file):
    return load_file("launch/submit.py")


def test_cluster_yaml_has_the_launchers_required_keys(cluster):
    missing = [k for k in REQUIRED if not cluster.get(k)]
    assert missing == []
    assert cluster["provider"]["type"] and isinstance(cluster["available_node_types"], dict)


def test_cluster_yaml_node_types_referenced_exist(cluster):
    types = cluster["available_node_types"]
    assert cluster["head_node_type"] in types
    workers = [t for t in types if t != cluster["head_node_type"]]
    assert workers, "no worker node type"
    for name, t in types.items():
        assert {"resources", "node_config"} <= set(t), name
        if name in workers:
            assert 0 <= t.get("min_workers", 0) <= t["max_workers"] <= cluster["max_workers"], name


def test_cluster_yaml_runs_setup_and_starts_ray_from_the_venv(cluster):
    setup = " ".join(cluster["setup_commands"])
    assert "scripts/setup.sh" in setup
    start = cluster["head_start_ray_commands"] + cluster["worker_start_ray_commands"]
    assert all(".venv/bin/activate" in c for c in start)  # a job's `python` is the venv's
    assert any("--head" in c for c in cluster["head_start_ray_commands"])
    assert any("$RAY_HEAD_IP" in c for c in cluster["worker_start_ray_commands"])


def test_cluster_yaml_passes_the_launchers_own_validation(cluster):
    # what `ray up` runs before it contacts the cloud: fill in the provider's defaults, then validate against
    # the launcher's JSON schema and its node-type checks (private API: Ray is pinned)
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(copy.deepcopy(cluster)))


def test_submit_entrypoint_quotes_every_override(submit):
    ep = submit.build_entrypoint(
        "maigym_ray.cli.eval", ["tasks.apps=[mail,food]", "name=a b"], "/opt/venv/bin/python"
    )
    assert shlex.split(ep) == [
        "/opt/venv/bin/python",
        "-m",
        "maigym_ray.cli.eval",
        "ray.address=auto",
        "tasks.apps=[mail,food]",
        "name=a b",
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], ["ray.address=auto"]),
        (["a=1", "-m"], ["ray.address=auto", "a=1", "-m"]),
        (["-m", "a=1,2"], ["-m", "ray.address=auto", "a=1,2"]),  # Hydra wants one run of overrides
        (["-cn", "collect", "a=1"], ["-cn", "collect", "ray.address=auto", "a=1"]),
        (["--info", "config", "a=1"], ["--info", "config", "ray.address=auto", "a=1"]),
        (["-i", "a=1"], ["-i", "ray.address=auto", "a=1"]),
        (["ray.address=10.0.0.5:6379"], ["ray.address=10.0.0.5:6379"]),
    ],
)
def test_submit_adds_ray_address_where_hydra_accepts_it(submit, args, expected):
    assert submit.with_ray_address(args) == expected


def test_submit_args_pass_hydra_flags_through(submit):
    args = submit.parse_args(["--remote", "maigym_ray.cli.eval", "-m", "policy.seed=1,2", "--cfg", "job"])
    assert args.remote and args.module == "maigym_ray.cli.eval"
    assert args.overrides == ["-m", "policy.seed=1,2", "--cfg", "job"]


@pytest.mark.parametrize(
    ("address", "local"),
    [
        ("http://127.0.0.1:8265", True),
        ("http://localhost:8265", True),
        ("127.0.0.1:6379", True),
        ("http://[::1]:8265", True),
        ("auto", True),
        ("http://10.0.0.5:8265", False),
        ("https://ray.example.com", False),
        ("ray-head:6379", False),
    ],
)
def test_submit_local_address(submit, address, local):
    assert submit.is_local_address(address) is local


def test_submit_runtime_env(submit, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    local = submit.build_runtime_env(local=True, extra_env={"HF_HOME": "/data"})
    assert local["working_dir"] == str(ROOT)
    assert {".venv", ".git", "outputs", "multirun", "wandb"} <= set(local["excludes"])
    assert local["env_vars"]["WANDB_MODE"] == "offline" and local["env_vars"]["HF_HOME"] == "/data"
    assert local["env_vars"]["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert local["env_vars"]["GLOO_SOCKET_IFNAME"] == "lo"
    remote = submit.build_runtime_env(local=False)
    assert "GLOO_SOCKET_IFNAME" not in remote["env_vars"]  # would cut a multi-node cluster's collectives off


def test_submit_python(submit, monkeypatch):
    monkeypatch.delenv("MAIGYM_PYTHON", raising=False)
    assert submit.resolve_python(local=True) == sys.executable
    assert submit.resolve_python(local=False) == "python"
    monkeypatch.setenv("MAIGYM_PYTHON", "/srv/venv/bin/python")
    assert submit.resolve_python(local=False) == "/srv/venv/bin/python"


def test_submit_address(submit, monkeypatch):
    for k in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(k, raising=False)
    assert submit.resolve_address() == "http://127.0.0.1:8265"
    monkeypatch.setenv("RAY_ADDRESS", "http://10.0.0.5:8265")
    assert submit.resolve_address() == "http://10.0.0.5:8265"
    assert submit.resolve_address("http://h:1") == "http://h:1"
