"""A multi-node Ray cluster on one machine, on loopback: a head and worker nodes started with ``ray start``,
each with its own ports, custom resources and (optionally) advertised GPUs. Used by the multi-node tests and
benchmarks/multinode.py, and a template for a real cluster's ``ray start`` lines (docs/scaling.md).

Each node is a blocking ``ray start --block`` in its own process group: stopping that process stops exactly
that node (``ray stop`` would stop every Ray on the machine, other agents' too). Token auth is off for this
throwaway loopback cluster (``RAY_AUTH_MODE=disabled``, DESIGN.md §10): Ray reads the auth mode once per
process, and a test process may have read it already. A real cluster keeps Ray's default token auth.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class NodeSpec:
    """One node of the cluster."""

    #: a name for the node (tests look nodes up by it).
    name: str
    #: CPUs the node advertises.
    num_cpus: int = 1
    #: GPUs the node advertises (they need not exist: placement runs, CUDA stays absent).
    num_gpus: int = 0
    #: custom resources the node advertises.
    resources: dict[str, float] = field(default_factory=dict)


@dataclass
class Node:
    """A started node: its spec, its ``ray start --block`` process and its Ray node id."""

    spec: NodeSpec
    proc: subprocess.Popen[bytes]
    node_id: str = ""


class LocalCluster:
    """Head plus workers on 127.0.0.1; ``start()``, ``kill(name)``, ``stop()``."""

    def __init__(self, head: NodeSpec, workers: list[NodeSpec], dashboard: bool = True) -> None:
        os.environ["RAY_AUTH_MODE"] = "disabled"  # before this process imports ray, where it can
        self.head_spec, self.worker_specs, self.dashboard = head, workers, dashboard
        # Ray's socket paths must stay under the 107-byte limit of a Unix socket path: a short temp dir.
        self.temp_dir = tempfile.mkdtemp(prefix="mn", dir="/tmp")
        self.gcs_port, self.dash_port = free_port(), free_port()
        self.nodes: dict[str, Node] = {}
        bin_dir = Path(sys.executable).parent
        self.ray_bin = str(bin_dir / "ray")
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "disabled",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
            "GLOO_SOCKET_IFNAME": "lo",
            # a job's `python` is looked up on the PATH of whoever ran `ray start` (launch/submit.py)
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        }
        for k in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN_PATH"):
            self.env.pop(k, None)

    @property
    def gcs_address(self) -> str:
        """The head's GCS address (``ray.init(address=...)``)."""
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        """The head's job server."""
        return f"http://127.0.0.1:{self.dash_port}"

    def _start_node(self, spec: NodeSpec, head: bool) -> Node:
        cmd = [
            self.ray_bin,
            "start",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={spec.num_cpus}",
            f"--num-gpus={spec.num_gpus}",
            f"--resources={json.dumps(spec.resources)}",
            # fixed defaults another Ray on this machine may hold
            f"--dashboard-agent-listen-port={free_port()}",
            f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
        ]
        if head:
            cmd += [
                "--head",
                f"--port={self.gcs_port}",
                f"--ray-client-server-port={free_port()}",
                f"--include-dashboard={'true' if self.dashboard else 'false'}",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dash_port}",
            ]
        else:
            cmd += [f"--address={self.gcs_address}"]
        log = open(Path(self.temp_dir) / f"ray_start_{spec.name}.log", "wb")
        proc = subprocess.Popen(
            cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        node = Node(spec, proc)
        self.nodes[spec.name] = node
        return node

    def start(self, timeout_s: float = 120.0) -> LocalCluster:
        """Starts the head, connects this process to it as the driver (so the driver sits on the head's node,
        not on a worker that a test may kill), then starts the workers and waits until every node is alive."""
        import ray

        self._start_node(self.head_spec, head=True)
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_running()
            try:
                with socket.create_connection(("127.0.0.1", self.gcs_port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"head not up after {timeout_s} s: {self.log('head')[-2000:]}"
                    ) from None
                time.sleep(0.5)
        self.connect()
        for w in self.worker_specs:
            self._start_node(w, head=False)
        while self._match_nodes() < 1 + len(self.worker_specs):
            self._check_running()
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes not alive after {timeout_s} s: {ray.nodes()}")
            time.sleep(0.5)
        return self

    def _check_running(self) -> None:
        for name, node in self.nodes.items():
            if node.proc.poll() is not None:
                raise RuntimeError(f"ray start of node {name} exited: {self.log(name)[-2000:]}")

    def _match_nodes(self) -> int:
        """Maps node names to Ray node ids by their advertised resources; returns how many are alive."""
        import ray

        alive = [n for n in ray.nodes() if n["Alive"]]
        for node in self.nodes.values():
            for n in alive:
                res = n["Resources"]
                wanted = all(res.get(k) == v for k, v in node.spec.resources.items())
                if wanted and res.get("GPU", 0) == node.spec.num_gpus:
                    node.node_id = n["NodeID"]
        return len(alive)

    def connect(self) -> Any:
        """``ray.init`` this process into the cluster (as a driver on the head's node); returns ray."""
        import ray

        os.environ["RAY_AUTH_MODE"] = "disabled"
        deadline = time.monotonic() + 60
        while True:
            try:
                ray.init(address=self.gcs_address, log_to_driver=False)
                break
            except ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        return ray

    def node_id(self, name: str) -> str:
        """The Ray node id of the node called ``name``."""
        self._match_nodes()
        return self.nodes[name].node_id

    def kill(self, name: str) -> None:
        """Kills node ``name`` (its raylet and every worker of it), as a machine loss would."""
        node = self.nodes[name]
        tree = _tree(node.proc.pid)
        for p in tree:
            try:
                p.kill()
            except psutil.Error:
                pass
        node.proc.kill()
        node.proc.wait(timeout=30)

    def log(self, name: str) -> str:
        """The ``ray start`` output of node ``name``."""
        return (Path(self.temp_dir) / f"ray_start_{name}.log").read_text(errors="replace")

    def stop(self) -> None:
        """Stops every node (workers first), then anything left that names this cluster's temp dir."""
        for name in [*(w.name for w in self.worker_specs), self.head_spec.name]:
            node = self.nodes.get(name)
            if node is None or node.proc.poll() is not None:
                continue
            tree = _tree(node.proc.pid)
            node.proc.send_signal(signal.SIGTERM)
            try:
                node.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                node.proc.kill()
            for p in tree:
                try:
                    p.kill()
                except psutil.Error:
                    pass
        for p in psutil.process_iter(["pid", "cmdline"]):
            if self.temp_dir in " ".join(p.info["cmdline"] or []):
                try:
                    p.kill()
                except psutil.Error:
                    pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


#: the three-node layout of conf/topology/loopback_3node.yaml.
LOOPBACK_3NODE = (
    NodeSpec("head", num_cpus=1, resources={"driver_host": 1}),
    [
        NodeSpec("worker_a", num_cpus=2, resources={"web_host": 2, "engine_host": 1}),
        NodeSpec("worker_b", num_cpus=2, num_gpus=1, resources={"web_host": 2, "trainer_host": 1}),
    ],
)
