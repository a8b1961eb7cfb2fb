"""A multi-node Ray cluster on one machine, on loopback: a head and worker nodes, each with its own ports,
custom resources and (optionally) advertised GPUs. Used by the multi-node tests and benchmarks/multinode.py.

The nodes are started with ``ray.cluster_utils.Cluster`` (real raylets, object stores and a GCS, one set per
node), not ``ray start``: a worker's ``ray start --address=127.0.0.1:PORT`` rewrites a loopback address to the
machine's routable IP, and with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (the loopback switch of
maigym_ray/__init__.py) it refuses to join at all (checked with Ray 2.60). ``Cluster`` starts the nodes from
this process with the loopback settings, so every node listens on 127.0.0.1 only. For a real cluster's
``ray start`` lines see docs/scaling.md.

Token auth is off for this throwaway cluster (``RAY_AUTH_MODE=disabled``, docs/platform-notes.md). Nodes are
stopped by this process (``kill(name)`` removes one, as a machine loss would; ``stop()`` all), never by
``ray stop``.

``python -m maigym_ray.runtime.local_cluster`` holds the three-node cluster of ``loopback_3node`` until Ctrl-C
and prints its job server's address, for submitting jobs to it by hand (docs/scaling.md).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any


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


class LocalCluster:
    """Head plus workers on 127.0.0.1; ``start()``, ``kill(name)``, ``stop()``."""

    def __init__(self, head: NodeSpec, workers: list[NodeSpec], dashboard: bool = True) -> None:
        # Before this process starts any node or imports ray where it can (nodes inherit the environment).
        os.environ["RAY_AUTH_MODE"] = "disabled"
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        # a job's `python` is looked up on the PATH of whoever started the head (launch/submit.py)
        bin_dir = os.path.dirname(sys.executable)
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        self.head_spec, self.worker_specs, self.dashboard = head, workers, dashboard
        self.dash_port = free_port()
        self.cluster: Any = None
        self.nodes: dict[str, Any] = {}
        self.node_ids: dict[str, str] = {}

    @property
    def gcs_address(self) -> str:
        """The head's GCS address (``ray.init(address=...)``)."""
        return self.cluster.address

    @property
    def dashboard_url(self) -> str:
        """The head's job server."""
        return f"http://127.0.0.1:{self.dash_port}"

    def _args(self, spec: NodeSpec) -> dict[str, Any]:
        return {
            "node_ip_address": "127.0.0.1",
            "num_cpus": spec.num_cpus,
            "num_gpus": spec.num_gpus,
            "resources": dict(spec.resources),
            "object_store_memory": 128 * 1024 * 1024,
            "dashboard_agent_listen_port": free_port(),
            # Nodes on one machine share the session dir. Ray unpacks a job's working_dir into the node's
            # runtime-env dir, and a node whose agent has not seen the package yet removes and re-extracts
            # it (packaging.download_and_unpack_package, overwrite=True): with one shared dir, a worker node
            # deleted the files under the running job's driver (ModuleNotFoundError on its next import).
            # One dir per node, as separate machines have.
            "runtime_env_dir_name": f"runtime_resources_{spec.name}",
        }

    def start(self, timeout_s: float = 120.0) -> LocalCluster:
        """Starts the head, connects this process to it as the driver (so the driver sits on the head's node,
        not on a worker that a test may kill), then starts the workers and waits until every node is alive."""
        import ray
        from ray.cluster_utils import Cluster

        head = {
            **self._args(self.head_spec),
            "include_dashboard": self.dashboard,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": self.dash_port,
            "ray_client_server_port": free_port(),
        }
        self.cluster = Cluster(initialize_head=True, head_node_args=head)
        self.nodes[self.head_spec.name] = self.cluster.head_node
        ray.init(address=self.cluster.address, log_to_driver=False)
        for w in self.worker_specs:
            self.nodes[w.name] = self.cluster.add_node(wait=False, **self._args(w))
        deadline = time.monotonic() + timeout_s
        while self._match_nodes() < 1 + len(self.worker_specs):
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes not alive after {timeout_s} s: {ray.nodes()}")
            time.sleep(0.5)
        if self.dashboard:
            self._wait_http(f"{self.dashboard_url}/api/version", deadline)
        return self

    def _wait_http(self, url: str, deadline: float) -> None:
        import urllib.request

        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"{url} not up")

    def _match_nodes(self) -> int:
        """Maps node names to Ray node ids; returns how many nodes are alive."""
        import ray

        alive = [n for n in ray.nodes() if n["Alive"]]
        for name, node in self.nodes.items():
            self.node_ids[name] = node.node_id
        return len(alive)

    def node_id(self, name: str) -> str:
        """The Ray node id of the node called ``name``."""
        return self.nodes[name].node_id

    def kill(self, name: str) -> None:
        """Kills node ``name`` (its raylet and every worker of it) at once, as a machine loss would."""
        self.cluster.remove_node(self.nodes[name], allow_graceful=False)

    def stop(self) -> None:
        """Disconnects this process and stops every node."""
        import ray

        ray.shutdown()
        if self.cluster is not None:
            self.cluster.shutdown()


#: the three-node layout of conf/topology/loopback_3node.yaml.
LOOPBACK_3NODE = (
    NodeSpec("head", num_cpus=1, resources={"driver_host": 1}),
    [
        NodeSpec("worker_a", num_cpus=2, resources={"web_host": 2, "engine_host": 1}),
        NodeSpec("worker_b", num_cpus=2, num_gpus=1, resources={"web_host": 2, "trainer_host": 1}),
    ],
)


def main() -> None:
    """Starts the ``loopback_3node`` cluster, prints its addresses and holds it until Ctrl-C (or SIGTERM)."""
    import signal

    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    cluster = LocalCluster(*LOOPBACK_3NODE).start()
    # after start: the head node, started in this process, installs a SIGTERM handler of its own
    signal.signal(signal.SIGTERM, interrupt)  # `kill PID` stops every node, as Ctrl-C does
    print(f"job server: {cluster.dashboard_url}", flush=True)
    print(f"GCS:        {cluster.gcs_address}", flush=True)
    print("nodes: " + ", ".join(f"{n}={cluster.node_id(n)[:8]}" for n in cluster.nodes), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
