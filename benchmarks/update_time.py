"""Policy-update time: window-wise packing against step-wise packing of the same trajectories, same model.

    python benchmarks/update_time.py [--quick] [--json out.json]

Trajectories are built with the real history code (window-wise K=10, O=2) at realistic sizes: a 450-token
header, 350-token observation turns, 64-token replies. The same trajectories are packed window-wise (one
sequence per window) and step-wise (one per step), and each packing is trained by the same TorchTrainer on
the tiny default model, with the same token budget and one optimizer step. Both packings train exactly the
same response tokens, and the trainer tests show they give the same gradient. Only the compute differs.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from pathlib import Path

import torch

from maigym_ray.harness.history import HistoryConfig
from maigym_ray.harness.synthetic import synthetic_trajectories
from maigym_ray.rl.packing import pack_step, pack_window
from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig
from maigym_ray.types import Trajectory


def synthetic(cfg: HistoryConfig, episodes: int, steps: int, seed: int = 0) -> list[Trajectory]:
    """~450-token headers, 300-400-token observations, 64-token replies (the tiny model's vocabulary)."""
    return synthetic_trajectories(cfg, episodes, steps, 450, (300, 400), 64, 2500, seed)


def timed_update(model, seqs, cfg: TrainerConfig, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        trainer = TorchTrainer(copy.deepcopy(model), cfg)
        times.append(trainer.update(seqs)["update_s"])
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM

    from maigym_ray.policy.tiny_models import default_model_dir

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(
        default_model_dir("text"), torch_dtype=torch.float32, attn_implementation="sdpa"
    )
    episodes, steps, repeats = (2, 20, 1) if args.quick else (4, 30, 1)
    hist = HistoryConfig("window", 10, 2)
    trajs = synthetic(hist, episodes, steps)
    adv = [1.0 if t.reward.success else -1.0 for t in trajs]
    window = [s for t, a in zip(trajs, adv, strict=True) for s in pack_window(t, hist, a)]
    step = [s for t, a in zip(trajs, adv, strict=True) for s in pack_step(t, a)]
    cfg = TrainerConfig(token_budget=16384)
    print(f"[update_time] window-wise update: {len(window)} sequences", flush=True)
    w_s = timed_update(model, window, cfg, repeats)
    print(f"[update_time] step-wise update: {len(step)} sequences", flush=True)
    s_s = timed_update(model, step, cfg, repeats)
    out = {
        "window_update_s": w_s,
        "step_update_s": s_s,
        "ratio": w_s / s_s,
        "window_tokens": sum(map(len, window)),
        "step_tokens": sum(map(len, step)),
        "window_sequences": len(window),
        "step_sequences": len(step),
        "trained_tokens": sum(sum(s.loss_mask) for s in window),
        "episodes": episodes,
        "steps": steps,
        "model": "tiny-text (CPU)",
        "quick": args.quick,
    }
    print(f"{'packing':8s} {'sequences':>10s} {'tokens':>9s} {'update s':>9s}")
    print(f"{'window':8s} {len(window):10d} {out['window_tokens']:9d} {w_s:9.2f}")
    print(f"{'step':8s} {len(step):10d} {out['step_tokens']:9d} {s_s:9.2f}")
    print(f"ratio window/step = {out['ratio']:.3f} (tokens {out['window_tokens'] / out['step_tokens']:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
