"""Weight broadcast bandwidth over gloo: bucketed against per-tensor, next to the loopback copy bandwidth.

    python benchmarks/weight_sync.py [--quick] [--json out.json]

Two Ray actors (a trainer rank and an engine rank) join a torch gloo group through a ``file://``
rendezvous with ``GLOO_SOCKET_IFNAME=lo``, so every socket is on loopback (torch's TCPStore would listen on
all interfaces). The same model-shaped set of tensors is broadcast per tensor (plain gloo) and in flat buckets through
the product's path (maigym_ray/weights/group.py: each member's own gloo process group, met at rank 0's
store on its node IP, next to that default group). ``loopback_copy_gbps`` is the raw bandwidth of moving the same bytes between
the same two processes over a loopback TCP socket: the physical limit the broadcast runs against.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import maigym_ray  # noqa: F401  (loopback Ray settings: must run before ray is imported)

# isort: split

import ray

from maigym_ray.config import RayConfig
from maigym_ray.runtime.ray_init import init_ray


def model_shapes(total_mb: int) -> list[tuple[str, tuple[int, ...]]]:
    """Shapes like a Qwen2 layer stack: q/k/v with biases, o, gate/up/down and two norms per layer, so
    small tensors sit next to big ones as in real checkpoints."""
    hidden = 256
    per_layer = [
        ("q", (hidden, hidden)),
        ("q_bias", (hidden,)),
        ("k", (hidden, hidden)),
        ("k_bias", (hidden,)),
        ("v", (hidden, hidden)),
        ("v_bias", (hidden,)),
        ("o", (hidden, hidden)),
        ("gate", (4 * hidden, hidden)),
        ("up", (4 * hidden, hidden)),
        ("down", (hidden, 4 * hidden)),
        ("norm1", (hidden,)),
        ("norm2", (hidden,)),
    ]
    shapes = [("embed", (8000, hidden))]
    layer = 0
    while sum(4 * _numel(s) for _, s in shapes) < total_mb * 1e6:
        shapes += [(f"layers.{layer}.{name}", s) for name, s in per_layer]
        layer += 1
    return shapes


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class Rank:
    """One rank of the gloo group."""

    def __init__(self, rank: int, init_file: str, total_mb: int) -> None:
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        import torch
        import torch.distributed as dist

        self.rank = rank
        self.torch, self.dist = torch, dist
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
        torch.manual_seed(0)
        self.tensors = [torch.randn(s) if rank == 0 else torch.empty(s) for _, s in model_shapes(total_mb)]
        self.nbytes = sum(t.numel() * t.element_size() for t in self.tensors)

    def per_tensor(self) -> float:
        self.dist.barrier()
        t0 = time.perf_counter()
        for t in self.tensors:
            self.dist.broadcast(t, src=0)
        self.dist.barrier()
        return time.perf_counter() - t0

    def join_weight_group(self) -> None:
        from maigym_ray.weights import group as weight_group

        weight_group.join(2, self.rank, "bench")

    def bucketed(self, bucket_mb: int) -> float:
        """The product's path (weights/group.py): flat buckets over the weight group (gloo, met through Ray's
        GCS), views into each received bucket on the receiver."""
        from maigym_ray.weights import group as weight_group

        named = [(str(i), t) for i, t in enumerate(self.tensors)]
        buckets = weight_group.layout(named, bucket_mb << 20)
        if getattr(self, "buffers_mb", None) != bucket_mb:  # kept between syncs, as the engine actor does
            self.buffers, self.buffers_mb = weight_group.receive_buffers(buckets), bucket_mb
        self.dist.barrier()
        t0 = time.perf_counter()
        if self.rank == 0:
            weight_group.send(named, buckets, "bench")
        else:
            self.received = weight_group.receive(buckets, "bench", self.buffers)
        self.dist.barrier()
        return time.perf_counter() - t0

    def checksum(self) -> float:
        return float(sum(t.double().sum() for t in self.tensors))

    def per_tensor_checksum(self) -> float:
        """After a per-tensor broadcast every rank holds the sender's tensors."""
        return self.checksum()

    def socket_server(self) -> int:
        import socket

        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        return self.srv.getsockname()[1]

    def socket_copy(self, port: int) -> float:
        """Rank 0 sends nbytes to rank 1 over loopback TCP; returns seconds (measured on the receiver)."""
        import socket

        if self.rank == 1:
            conn, _ = self.srv.accept()
            buf = bytearray(4 << 20)
            view = memoryview(buf)
            got = 0
            t0 = time.perf_counter()
            while got < self.nbytes:
                n = conn.recv_into(view)
                if not n:
                    break
                got += n
            dt = time.perf_counter() - t0
            conn.close()
            return dt
        payload = self.torch.cat([t.reshape(-1) for t in self.tensors]).numpy().tobytes()
        s = socket.create_connection(("127.0.0.1", port))  # the receiver's clock starts at accept
        s.sendall(payload)
        s.close()
        return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--bucket-mb", type=int, default=8)
    args = ap.parse_args()
    total_mb = 64 if args.quick else 256
    init_ray(RayConfig(num_cpus=2))
    init_file = Path(tempfile.mkdtemp(prefix="maigym-gloo-")) / "rendezvous"
    ranks = [ray.remote(Rank).options(num_cpus=0).remote(r, str(init_file), total_mb) for r in range(2)]
    nbytes = ray.get(ranks[0].__ray_call__.remote(lambda self: self.nbytes))
    ray.get([r.join_weight_group.remote() for r in ranks])
    best = {"per_tensor": float("inf"), "bucketed": float("inf"), "copy": float("inf")}
    repeats = 2 if args.quick else 3
    for rep in range(repeats):
        print(f"[weight_sync] repeat {rep + 1}/{repeats}: per tensor, bucketed, loopback copy", flush=True)
        best["per_tensor"] = min(best["per_tensor"], max(ray.get([r.per_tensor.remote() for r in ranks])))
        best["bucketed"] = min(
            best["bucketed"], max(ray.get([r.bucketed.remote(args.bucket_mb) for r in ranks]))
        )
        port = ray.get(ranks[1].socket_server.remote())
        best["copy"] = min(best["copy"], max(ray.get([r.socket_copy.remote(port) for r in ranks])))
    sums = ray.get([r.checksum.remote() for r in ranks])
    gb = nbytes / 1e9
    out = {
        "bucketed_gbps": gb / best["bucketed"],
        "per_tensor_gbps": gb / best["per_tensor"],
        "loopback_copy_gbps": gb / best["copy"],
        "bytes": nbytes,
        "tensors": len(model_shapes(total_mb)),
        "bucket_mb": args.bucket_mb,
        "received_matches": abs(sums[0] - sums[1]) < 1e-3 * abs(sums[0]),
        "quick": args.quick,
    }
    print(f"{'transfer':14s} {'GB/s':>8s}")
    for k in ("bucketed_gbps", "per_tensor_gbps", "loopback_copy_gbps"):
        print(f"{k[:-5]:14s} {out[k]:8.2f}")
    print(
        f"{nbytes / 1e6:.0f} MB in {out['tensors']} tensors; received weights match: {out['received_matches']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
