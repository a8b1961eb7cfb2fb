"""Trainer tokens/s for each trainer mode on a real model: full fine-tuning in float32, under bf16 autocast,
and the last N decoder layers only (bf16 autocast).

    python benchmarks/trainer_modes.py [--model smollm2-135m] [--quick] [--json out.json]

Each mode takes the same optimizer steps (one warm-up step first, not timed) over the same packed sequences
of the size the main job trains (GUI-agent windows: 800-token sequences with the loss on three 11-token
replies). The arms run one after the other in one process, so they share the machine's load; the ratios
between them are what this measures, the absolute rates move with the machine's other work.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from maigym_ray.rl.packing import PackedSequence
from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig

#: mode name -> (autocast, trainable_layers)
MODES: dict[str, tuple[str, int]] = {
    "full_fp32": ("off", 0),
    "full_bf16": ("bf16", 0),
    "top8_bf16": ("bf16", 8),
}


def sequences(n: int, length: int, vocab: int, seed: int = 0) -> list[PackedSequence]:
    """``n`` sequences of ``length`` random ids, the loss on three 11-token replies each."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        mask = [0] * length
        for end in (length // 3, 2 * length // 3, length):
            mask[end - 11 : end] = [1] * 11
        out.append(
            PackedSequence(
                input_ids=tuple(rng.randrange(vocab) for _ in range(length)),
                loss_mask=tuple(mask),
                old_logprobs=(0.0,) * length,
                advantage=1.0,
                episode_id=f"e{i}",
                steps=(0, 1, 2),
            )
        )
    return out


def measure(model_name: str, quick: bool) -> dict[str, float]:
    """tokens/s of each mode of MODES (trained tokens counted as the whole sequences, prompts included)."""
    from transformers import AutoModelForCausalLM

    from maigym_ray.policy.engine import resolve_model

    path = resolve_model(model_name)
    steps, batch, length = (1, 2, 400) if quick else (3, 4, 800)
    out: dict[str, float] = {}
    for name, (autocast, layers) in MODES.items():
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        seqs = sequences(batch, length, model.config.vocab_size)
        trainer = TorchTrainer(
            model, TrainerConfig(lr=1e-5, autocast=autocast, trainable_layers=layers, token_budget=8192)
        )
        trainer.update(seqs, objective="sft")  # warm-up: allocator, AdamW state
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            trainer.update(seqs, objective="sft")
            times.append(time.perf_counter() - t0)
        out[name] = batch * length / statistics.median(times)
        del trainer, model
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rates = measure(args.model, args.quick)
    print(f"| mode ({args.model}) | tokens/s | vs full_fp32 |")
    print("|---|---|---|")
    for name, r in rates.items():
        print(f"| {name} | {r:.0f} | {r / rates['full_fp32']:.2f}x |")
    result = {
        "model": args.model,
        "quick": args.quick,
        "train_tokens_per_s": rates,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "wall_s": time.perf_counter() - t0,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
