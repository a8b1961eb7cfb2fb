"""GPU check: policy-update tokens/s (window-wise against step-wise packing), weight hand-off GB/s and, on the
llama sizes, generation tokens/s.

    python benchmarks/gpu_check.py --device cuda --size smollm2 --json $OUT/gpu_check.json   # what gpu_check.sh runs
    python benchmarks/gpu_check.py --device cuda --size 0.5b --json $OUT/gpu_check.json
    python benchmarks/gpu_check.py --device cpu --size tiny_llama --json /tmp/gpu_check.json   # smoke test

``smollm2`` is SmolLM2-135M-Instruct's architecture (the main job's model) built from its config with random
weights: its GGUF does not travel to the GPU machine, and speed does not depend on the weights' values.

Needs only torch, transformers and the repo's pure modules (maigym_ray.types, maigym_ray.harness.history,
maigym_ray.rl.packing/losses/trainer/weight_sync): none of them imports ray, vLLM or hydra, so a bare
``PYTHONPATH=<repo root>`` is enough on a machine without the project's venv.

1. Update. A random-init Qwen2 causal LM (``0.5b``: Qwen2.5-0.5B shapes, bf16, sdpa attention, gradient
   checkpointing) is trained by the repo's TorchTrainer on synthetic trajectories built with the real
   history code, packed three ways: ``window`` (window-wise K=10/O=2 history, one sequence per window),
   ``step`` (the same trajectories, one sequence per step: benchmarks/update_time.py's comparison, same
   trained tokens and gradient) and ``step_k5`` (step-wise last-k=5 history, one sequence per step: what a
   step-wise agent would train). Each packing is warmed up once, then timed over full updates (one optimizer
   step each) with ``torch.cuda.synchronize`` around the timing. tokens/s counts the packed sequences'
   tokens; loss_tokens/s counts the trained response tokens (equal for all packings, so it is the useful
   rate).
2. Weight hand-off on one device. The model's named parameters go to a second set of parameter buffers:
   bucketed (plan_buckets -> flatten -> a device-to-device copy into a receive buffer standing in for the
   broadcast -> unflatten -> per-tensor load into the engine's buffers), per tensor (one copy each), through
   pinned host memory (device -> pinned host, pinned host -> device, of the flattened buckets), and a raw
   copy of one buffer of the same size (the device's copy bandwidth). GB/s counts the model's bytes once.

Results are written to ``--json`` after each part, so a run cut short still leaves what it measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Runnable as a plain script from any working directory: the repo root (this file's parent's parent) goes
# first on sys.path, so the repo's modules import without the project being installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from maigym_ray.harness.history import HistoryConfig
from maigym_ray.harness.synthetic import synthetic_trajectories
from maigym_ray.rl.packing import PackedSequence, micro_batches, pack_step, pack_window
from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig
from maigym_ray.types import Trajectory
from maigym_ray.weights.buckets import flatten, plan_buckets, unflatten


@dataclass(frozen=True)
class Size:
    """Model shape and workload of one ``--size``."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    episodes: int
    steps: int
    header: int
    obs: tuple[int, int]
    response: int
    token_budget: int
    repeats: int
    bucket_mb: float
    #: "qwen2" or "llama" (SmolLM2's architecture: head_dim 64, rope theta 1e5)
    arch: str = "qwen2"


SIZES = {
    # SmolLM2-135M-Instruct's shapes (llama, 30 layers, tied embeddings: 134.5M parameters), built from its
    # config with random weights (a speed check: the time does not depend on the weights' values; its 98 MB
    # GGUF does not travel to the GPU machine). The main job's workload: ~300-token observations, 11-token
    # replies.
    "smollm2": Size(576, 30, 9, 3, 1536, 49152, 16, 15, 300, (250, 350), 11, 32768, 3, 128.0, "llama"),
    # CPU smoke test of the llama path (generation included).
    "tiny_llama": Size(64, 2, 1, 1, 128, 4096, 2, 12, 20, (30, 40), 8, 1024, 1, 0.125, "llama"),
    # Qwen2.5-0.5B shapes (tied embeddings: 494M parameters); 16 episodes x 15 steps of ~600-token
    # observations and 30-token replies.
    "0.5b": Size(896, 24, 14, 2, 4864, 151936, 16, 15, 450, (550, 650), 30, 32768, 3, 256.0),
    # CPU smoke test: the same code path in a few seconds (small buckets so that several are planned).
    "tiny": Size(64, 2, 4, 2, 128, 4096, 2, 12, 20, (30, 40), 8, 1024, 1, 0.125),
}


def synthetic(cfg: HistoryConfig, size: Size, seed: int = 0) -> list[Trajectory]:
    """Trajectories whose prompts come from the real history code (token-in/token-out, as the harness
    builds them). The same seed gives the same headers, observations and replies for every ``cfg``."""
    return synthetic_trajectories(
        cfg, size.episodes, size.steps, size.header, size.obs, size.response, size.vocab - 1, seed
    )


def packings(size: Size) -> dict[str, list[PackedSequence]]:
    """The three packings compared (see the module docstring)."""
    window_cfg = HistoryConfig("window", 10, 2)
    step_cfg = HistoryConfig("step", last_k=5)
    wt, st = synthetic(window_cfg, size), synthetic(step_cfg, size)

    def adv(t: Trajectory) -> float:
        return 1.0 if t.reward.success else -1.0

    return {
        "window": [s for t in wt for s in pack_window(t, window_cfg, adv(t))],
        "step": [s for t in wt for s in pack_step(t, adv(t))],
        "step_k5": [s for t in st for s in pack_step(t, adv(t))],
    }


def build_model(size: Size, device: torch.device, dtype: torch.dtype, grad_ckpt: bool) -> Any:
    """A random-init Qwen2 (or, with ``size.arch`` "llama", Llama) causal LM on ``device`` (no download)."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    shape = {
        "vocab_size": size.vocab,
        "hidden_size": size.hidden,
        "intermediate_size": size.intermediate,
        "num_hidden_layers": size.layers,
        "num_attention_heads": size.heads,
        "num_key_value_heads": size.kv_heads,
        "tie_word_embeddings": True,
        "use_cache": False,
    }
    if size.arch == "llama":  # SmolLM2's settings
        cfg = LlamaConfig(
            **shape, head_dim=64, max_position_embeddings=8192, rope_theta=100000.0, rms_norm_eps=1e-5
        )
    else:  # Qwen2.5's
        cfg = Qwen2Config(**shape, max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6)
    torch.manual_seed(0)
    # Built in float32 on CPU and then moved: avoids the torch_dtype/dtype keyword, which differs between
    # transformers 4.x and 5.x.
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError, ImportError):
        model = AutoModelForCausalLM.from_config(cfg)
    model.to(device=device, dtype=dtype)
    if grad_ckpt:
        try:  # non-reentrant: gradients reach the weights whatever the inputs' requires_grad
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        except TypeError:
            model.gradient_checkpointing_enable()
    return model


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


OOM_ERRORS: tuple[type[BaseException], ...] = (getattr(torch.cuda, "OutOfMemoryError", RuntimeError),)


def measure_updates(
    model: Any,
    packs: dict[str, list[PackedSequence]],
    size: Size,
    budget: int,
    device: torch.device,
    deadline: float,
) -> dict[str, Any]:
    """Warm-up then timed full updates of every packing at ``budget`` tokens per micro-batch. Timed repeats
    are interleaved (window, step, step_k5, window, ...); a repeat that would end past ``deadline`` is skipped."""
    trainer = TorchTrainer(model, TrainerConfig(token_budget=budget))
    res: dict[str, Any] = {name: {"times": [], "peak_mem_gb": None} for name in packs}
    for seqs in packs.values():
        # Warm-up on the sequences of the two largest micro-batches: kernels, cuBLAS handles and the caching
        # allocator's peak blocks are set up for a fraction of a full step-wise update's time.
        warm = [s for mb in micro_batches(seqs, budget)[:2] for s in mb]
        trainer.update(warm)
    sync(device)
    last_round = 0.0
    for r in range(size.repeats):
        # A repeat that would end past the deadline is not started (the first one always runs).
        if r and time.perf_counter() + last_round > deadline:
            print(f"  time limit: {r} timed repeat(s) per packing", flush=True)
            break
        round_start = time.perf_counter()
        for name, seqs in packs.items():
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            sync(device)
            t0 = time.perf_counter()
            trainer.update(seqs)
            sync(device)
            dt = time.perf_counter() - t0
            res[name]["times"].append(dt)
            if device.type == "cuda":
                gb = torch.cuda.max_memory_allocated(device) / 1e9
                res[name]["peak_mem_gb"] = max(res[name]["peak_mem_gb"] or 0.0, gb)
            print(f"  repeat {r} {name:8s} {dt:8.2f} s", flush=True)
        last_round = time.perf_counter() - round_start
    return res


def update_part(model: Any, size: Size, budget: int, device: torch.device, deadline: float) -> dict[str, Any]:
    """Part 1: window-wise against step-wise packing. On an out-of-memory error the whole comparison is
    redone at half the token budget (both packings always share one budget)."""
    packs = packings(size)
    oom_budgets: list[int] = []
    while True:
        try:
            res = measure_updates(model, packs, size, budget, device, deadline)
            break
        except OOM_ERRORS:
            pass
        # Out of the except block, so the traceback's frames (and their tensors) are gone before emptying.
        model.zero_grad(set_to_none=True)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        oom_budgets.append(budget)
        print(f"  out of memory at token budget {budget}; retrying at {budget // 2}", flush=True)
        budget //= 2
        if budget < 2048:
            raise RuntimeError(f"out of memory down to token budget {oom_budgets[-1]}")
    out: dict[str, Any] = {"token_budget": budget, "oom_budgets": oom_budgets}
    loss_tokens = sum(sum(s.loss_mask) for s in packs["window"])
    for name, seqs in packs.items():
        times = res[name]["times"]
        t = statistics.median(times)
        tokens = sum(map(len, seqs))
        mbs = micro_batches(seqs, budget)
        out.update(
            {
                f"{name}_update_s": t,
                f"{name}_update_times_s": times,
                f"{name}_tokens": tokens,
                f"{name}_padded_tokens": sum(len(mb) * max(map(len, mb)) for mb in mbs),
                f"{name}_sequences": len(seqs),
                f"{name}_micro_batches": len(mbs),
                f"{name}_max_len": max(map(len, seqs)),
                f"{name}_tokens_per_s": tokens / t,
                f"{name}_loss_tokens_per_s": sum(sum(s.loss_mask) for s in seqs) / t,
                f"{name}_peak_mem_gb": res[name]["peak_mem_gb"],
            }
        )
    out["ratio"] = out["window_update_s"] / out["step_update_s"]
    out["ratio_k5"] = out["window_update_s"] / out["step_k5_update_s"]
    out["trained_tokens"] = loss_tokens
    return out


def timed(fn: Callable[[], object], device: torch.device, reps: int) -> float:
    """Median seconds of ``fn`` over ``reps`` runs after one warm-up, synchronised around each run."""
    fn()
    times = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def weight_part(model: Any, size: Size, device: torch.device, reps: int) -> dict[str, Any]:
    """Part 2: weight hand-off throughput on one device (see the module docstring)."""
    named = [(n, p.detach()) for n, p in model.named_parameters()]  # tied embeddings appear once
    src = [t for _, t in named]
    dst = [torch.empty_like(t) for t in src]  # the engine's parameter buffers
    nbytes = sum(t.numel() * t.element_size() for t in src)
    plan = plan_buckets([(n, t.shape, t.dtype) for n, t in named], int(size.bucket_mb * (1 << 20)))
    groups = [[src[i] for i in b.indices] for b in plan]
    recv = [torch.empty(b.numel, dtype=b.dtype, device=device) for b in plan]
    pin = device.type == "cuda"  # pinned host memory needs CUDA; on CPU this is a plain memcpy
    host = [torch.empty(b.numel, dtype=b.dtype, pin_memory=pin) for b in plan]
    flats = [flatten(g) for g in groups]

    def bucketed() -> None:
        for b, g, r in zip(plan, groups, recv, strict=True):
            r.copy_(flatten(g))  # the copy stands in for the broadcast of the flat bucket
            for d_i, view in zip(b.indices, unflatten(r, [t.shape for t in g]), strict=True):
                dst[d_i].copy_(view)  # the engine's load: one copy per named tensor

    def per_tensor() -> None:
        for s, d in zip(src, dst, strict=True):
            d.copy_(s)

    def flatten_only() -> None:
        for g in groups:
            flatten(g)

    def d2h() -> None:
        for f, h in zip(flats, host, strict=True):
            h.copy_(f, non_blocking=pin)

    def h2d() -> None:
        for h, r in zip(host, recv, strict=True):
            r.copy_(h, non_blocking=pin)

    big_src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    big_dst = torch.empty_like(big_src)

    def peak() -> None:
        big_dst.copy_(big_src)

    gb = nbytes / 1e9
    out: dict[str, Any] = {
        "bucketed_d2d_gbps": gb / timed(bucketed, device, reps),
        "per_tensor_d2d_gbps": gb / timed(per_tensor, device, reps),
        "flatten_gbps": gb / timed(flatten_only, device, reps),
        "d2h_pinned_gbps": gb / timed(d2h, device, reps),
        "h2d_pinned_gbps": gb / timed(h2d, device, reps),
        "peak_copy_gbps": gb / timed(peak, device, reps),
    }
    bucketed()
    handoff_ok = all(torch.equal(s, d) for s, d in zip(src, dst, strict=True))
    d2h()
    h2d()
    sync(device)
    roundtrip_ok = all(torch.equal(f, r) for f, r in zip(flats, recv, strict=True))
    out.update(
        {
            "weight_bytes": nbytes,
            "weight_tensors": len(src),
            "buckets": len(plan),
            "bucket_mb": size.bucket_mb,
            "pinned": pin,
            "handoff_matches": handoff_ok,
            "roundtrip_matches": roundtrip_ok,
        }
    )
    return out


def generation_part(model: Any, size: Size, device: torch.device) -> dict[str, Any]:
    """Part 3: greedy generation with the KV cache (transformers' ``generate``; the GPU machine has no vLLM):
    a batch of 16 prompts of ``size.header + size.obs[1]`` random tokens, ``size.response * 3`` new tokens."""
    batch, plen, new = (
        (16, size.header + size.obs[1], size.response * 3) if device.type == "cuda" else (2, 32, 8)
    )
    ids = torch.randint(0, size.vocab - 1, (batch, plen), generator=torch.Generator().manual_seed(0)).to(
        device
    )
    model.eval()
    times = []
    with torch.no_grad():
        for _ in range(3):
            sync(device)
            t0 = time.perf_counter()
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                use_cache=True,
                pad_token_id=0,
            )
            sync(device)
            times.append(time.perf_counter() - t0)
    model.train()
    dt = statistics.median(times[1:]) if len(times) > 1 else times[0]
    assert out.shape == (batch, plen + new)
    return {
        "generate": {
            "batch": batch,
            "prompt_tokens": plen,
            "new_tokens": new,
            "seconds": dt,
            "new_tokens_per_s": batch * new / dt,
        }
    }


def environment(device: torch.device) -> dict[str, Any]:
    """Versions and device, recorded next to the numbers."""
    import transformers

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update({"gpu": props.name, "gpu_mem_gb": props.total_memory / 1e9, "cuda": torch.version.cuda})
    return env


def print_tables(out: dict[str, Any]) -> None:
    if "window_update_s" in out:
        print(
            f"\n{'packing':8s} {'seqs':>5s} {'mbs':>4s} {'tokens':>9s} {'padded':>9s} {'update s':>9s} "
            f"{'tok/s':>10s} {'loss tok/s':>10s} {'peak GB':>8s}"
        )
        for name in ("window", "step", "step_k5"):
            mem = out[f"{name}_peak_mem_gb"]
            print(
                f"{name:8s} {out[f'{name}_sequences']:5d} {out[f'{name}_micro_batches']:4d} "
                f"{out[f'{name}_tokens']:9d} {out[f'{name}_padded_tokens']:9d} {out[f'{name}_update_s']:9.2f} "
                f"{out[f'{name}_tokens_per_s']:10.0f} {out[f'{name}_loss_tokens_per_s']:10.0f} "
                f"{'-' if mem is None else f'{mem:.1f}':>8s}"
            )
        print(
            f"ratio window/step = {out['ratio']:.3f}, window/step_k5 = {out['ratio_k5']:.3f} "
            f"(token budget {out['token_budget']}, {out['trained_tokens']} trained tokens)"
        )
    if "peak_copy_gbps" in out:
        print(f"\n{'hand-off':14s} {'GB/s':>9s}")
        for k in (
            "bucketed_d2d_gbps",
            "per_tensor_d2d_gbps",
            "flatten_gbps",
            "d2h_pinned_gbps",
            "h2d_pinned_gbps",
            "peak_copy_gbps",
        ):
            print(f"{k[:-5]:14s} {out[k]:9.2f}")
        print(
            f"{out['weight_bytes'] / 1e6:.0f} MB in {out['weight_tensors']} tensors, {out['buckets']} buckets "
            f"of <= {out['bucket_mb']} MB; hand-off matches: {out['handoff_matches']}, "
            f"pinned round trip matches: {out['roundtrip_matches']}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", choices=sorted(SIZES), default="0.5b")
    ap.add_argument("--json", default="", help="where to write the results (after each part)")
    ap.add_argument("--token-budget", type=int, default=0, help="tokens per micro-batch (0: the size's)")
    ap.add_argument("--repeats", type=int, default=0, help="timed updates per packing (0: the size's)")
    ap.add_argument("--bucket-mb", type=float, default=0.0, help="weight-sync bucket size (0: the size's)")
    ap.add_argument("--no-grad-ckpt", action="store_true", help="turn gradient checkpointing off")
    ap.add_argument(
        "--time-limit",
        type=float,
        default=360.0,
        help="seconds from start: no timed repeat predicted past it",
    )
    ap.add_argument("--cpu-threads", type=int, default=1, help="torch threads on --device cpu")
    ap.add_argument("--skip-update", action="store_true")
    ap.add_argument("--skip-weights", action="store_true")
    args = ap.parse_args()
    start = time.perf_counter()
    size = SIZES[args.size]
    size = dataclasses.replace(
        size,
        token_budget=args.token_budget or size.token_budget,
        repeats=args.repeats or size.repeats,
        bucket_mb=args.bucket_mb or size.bucket_mb,
    )
    device = torch.device(args.device)
    if device.type == "cpu":
        # The CPU run is a smoke test of the code path, not a measurement. On a shared, loaded machine,
        # OpenMP threads spin-waiting on each other made it ~30x slower than one thread.
        torch.set_num_threads(args.cpu_threads)
    if device.type == "cuda" and tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 1):
        # Read at the first CUDA allocation: growable segments keep the update's large logits tensors, whose
        # size changes with every micro-batch, from fragmenting the cache into an out-of-memory error.
        os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    # bf16 as the trainer would run on GPUs; float32 on CPU, where bf16 matmuls can be very slow.
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    out: dict[str, Any] = {
        **environment(device),
        "size": args.size,
        "weights": "random, built from the size's config (speed does not depend on the weights' values)",
        "dtype": str(dtype).removeprefix("torch."),
        "grad_ckpt": not args.no_grad_ckpt,
        "episodes": size.episodes,
        "steps": size.steps,
        "history": "window K=10 O=2; step_k5: last k=5",
        "complete": False,
    }

    def save() -> None:
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=2))

    model = build_model(size, device, dtype, grad_ckpt=not args.no_grad_ckpt)
    out["model_params"] = sum(p.numel() for p in model.parameters())
    out["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    out["model_build_s"] = time.perf_counter() - start
    print(
        f"model: {out['model_params'] / 1e6:.1f}M params, {out['dtype']}, attn {out['attn_implementation']}, "
        f"grad ckpt {out['grad_ckpt']} ({out['model_build_s']:.1f} s)",
        flush=True,
    )
    save()
    # Weights first: a few seconds, and its numbers survive if the updates run out of time.
    if not args.skip_weights:
        t0 = time.perf_counter()
        out.update(weight_part(model, size, device, reps=10 if device.type == "cuda" else 3))
        out["weight_part_s"] = time.perf_counter() - t0
        gc.collect()  # the hand-off's buffers (~3x the model) are unreferenced now; give them back
        if device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"weight hand-off measured ({out['weight_part_s']:.1f} s)", flush=True)
        save()
    if size.arch == "llama":
        t0 = time.perf_counter()
        out.update(generation_part(model, size, device))
        out["generate_part_s"] = time.perf_counter() - t0
        print(f"generation measured ({out['generate_part_s']:.1f} s): {out['generate']}", flush=True)
        save()
    if not args.skip_update:
        t0 = time.perf_counter()
        out.update(update_part(model, size, size.token_budget, device, deadline=start + args.time_limit))
        out["update_part_s"] = time.perf_counter() - t0
        save()
    out["total_s"] = time.perf_counter() - start
    out["complete"] = True
    save()
    print_tables(out)
    print(f"\ntotal {out['total_s']:.1f} s" + (f"; wrote {args.json}" if args.json else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
