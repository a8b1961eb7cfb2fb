"""GPU placement smoke: the trainer group on CUDA through the placement code, and a bucketed broadcast from
the GPU trainer to a receiver.

    python benchmarks/gpu_placement_check.py --json $OUT/gpu_placement.json          # on a GPU machine
    python benchmarks/gpu_placement_check.py --allow-cpu --json /tmp/gpu_placement.json   # CPU smoke test
    python benchmarks/gpu_placement_check.py --dry-run --json /tmp/gpu_placement.json     # the same, tiny (CI)

Starts a local Ray (which detects the GPUs), builds the Ray options from a topology (one trainer rank with one
GPU; with two GPUs or more the receiver stands in for an engine on a GPU of its own and the weights go over
NCCL, else over gloo from the GPU trainer), creates a TrainerGroup from them (maigym_ray/rl/trainer_group.py),
checks that the rank trains on ``cuda:0`` with Ray's ``CUDA_VISIBLE_DEVICES``, takes one update, broadcasts
the weights in buckets (maigym_ray/weights/group.py) and checks the received weights are bit-identical.
Needs torch, transformers and ray; without ray it writes ``{"skipped": ...}`` and exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)


def tiny_model(path: Path, hidden: int, layers: int) -> str:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=4096,
        hidden_size=hidden,
        intermediate_size=hidden * 4,
        num_hidden_layers=layers,
        num_attention_heads=max(2, hidden // 64),
        num_key_value_heads=max(1, hidden // 128),
        max_position_embeddings=512,
    )
    Qwen2ForCausalLM(cfg).save_pretrained(path)
    return str(path)


def batch(n: int = 4, length: int = 64) -> list[Any]:
    from maigym_ray.rl.packing import PackedSequence

    out = []
    for i in range(n):
        ids = tuple((7 * i + j) % 4000 + 10 for j in range(length))
        mask = tuple(1 if j >= length // 2 else 0 for j in range(length))
        out.append(PackedSequence(ids, mask, tuple(-1.0 * m for m in mask), 1.0 - 0.5 * i, f"ep{i}", (0,)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default="")
    ap.add_argument("--allow-cpu", action="store_true", help="run without CUDA (a smoke test of the path)")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--bucket-mb", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="CPU, a tiny model and one timed broadcast: the whole path in seconds "
        "(tests/integration/test_gpu_placement_dry.py)",
    )
    args = ap.parse_args()
    if args.dry_run:
        args.allow_cpu, args.hidden, args.layers, args.repeats, args.bucket_mb = True, 64, 2, 1, 1
    out: dict[str, Any] = {"complete": False, "dry_run": args.dry_run}

    def save() -> None:
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")

    try:
        import ray
    except ImportError:
        out["skipped"] = "ray is not installed here: the placement check needs it"
        save()
        print(out["skipped"])
        return 0
    import torch

    from maigym_ray.config import RayConfig
    from maigym_ray.rl.trainer import TrainerConfig
    from maigym_ray.rl.trainer_group import TrainerGroup
    from maigym_ray.runtime.placement import Placement
    from maigym_ray.runtime.ray_init import init_ray
    from maigym_ray.runtime.topology import (
        ClusterSpec,
        EnginesConfig,
        TopologyConfig,
        TrainerPlacementConfig,
        WeightSyncConfig,
        validate,
    )
    from maigym_ray.weights.group import WeightReceiverActor

    gpus = 0 if args.dry_run else torch.cuda.device_count()
    if gpus == 0 and not args.allow_cpu:
        out["skipped"] = "no CUDA device (pass --allow-cpu for a CPU smoke test)"
        save()
        print(out["skipped"])
        return 1
    nccl = gpus >= 2
    topo = TopologyConfig(
        name="gpu_smoke",
        engines=EnginesConfig(count=1, num_gpus=1 if nccl else 0),
        trainer=TrainerPlacementConfig(ranks=1, gpus_per_rank=1 if gpus else 0),
        weight_sync=WeightSyncConfig(backend="nccl" if nccl else "gloo", bucket_mb=args.bucket_mb),
        cluster=ClusterSpec(nodes=1, gpus=gpus, gpus_per_node=gpus),
    )
    validate(topo, {}, num_engines=1)
    pl = Placement(topo)
    out.update(gpus=gpus, backend=topo.weight_sync.backend, trainer_options=pl.trainer_rank(0))
    init_ray(RayConfig())
    try:
        model_dir = tiny_model(
            Path(tempfile.mkdtemp(prefix="gpu-place-")) / "model", args.hidden, args.layers
        )
        t0 = time.perf_counter()
        trainer = TrainerGroup(model_dir, TrainerConfig(lr=1e-4), "torch", None, [pl.trainer_rank(0)])
        (info,) = trainer.info
        out["trainer"] = {**info, "start_s": time.perf_counter() - t0}
        out["trainer_on_cuda"] = info["device"].startswith("cuda")
        print(
            f"trainer rank: {info['device']} ({info['device_reason']}), CUDA_VISIBLE_DEVICES="
            f"{info['cuda_visible_devices']}",
            flush=True,
        )
        stats = trainer.update(batch())
        out["update"] = {k: float(v) for k, v in stats.items()}
        save()
        receiver = ray.remote(WeightReceiverActor).options(**pl.engine()).remote()
        layout = trainer.layout(args.bucket_mb << 20)
        joined = ray.get(
            [
                trainer.join_weight_group(2, "smoke", topo.weight_sync.backend),
                receiver.join.remote(2, 1, "smoke", topo.weight_sync.backend),
            ],
            timeout=300,
        )
        out["rendezvous"] = joined[0]["rendezvous"]
        best = float("inf")
        for _ in range(args.repeats):
            r = receiver.receive_timed.remote(layout, "smoke")
            best = min(best, max(ray.get([trainer.send_weights(layout, "smoke"), r], timeout=300)))
        got = receiver.receive.remote(layout, "smoke")
        ray.get(trainer.send_weights(layout, "smoke"), timeout=300)
        _, received = ray.get(got, timeout=300)
        want = dict(trainer.weights())
        nbytes = sum(t.numel() * t.element_size() for t in want.values())
        out["weights_identical"] = all(torch.equal(received[n], t) for n, t in want.items())
        out["sync_bytes"] = nbytes
        out["buckets"] = len(layout)
        out["sync_gbps"] = nbytes / best / 1e9
        out["complete"] = True
        save()
        trainer.shutdown()
    finally:
        ray.shutdown()
    print(f"{'trainer device':24s} {out['trainer']['device']}")
    print(f"{'weights identical':24s} {out['weights_identical']}")
    print(f"{'sync GB/s':24s} {out['sync_gbps']:.2f} ({out['backend']}, {out['buckets']} buckets)")
    ok = out["weights_identical"] and (out["trainer_on_cuda"] or args.allow_cpu)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
