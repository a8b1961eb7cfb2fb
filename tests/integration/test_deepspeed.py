"""DeepSpeed ZeRO-2 and ZeRO-3 on the CPU accelerator, two gloo ranks on loopback, each training half the
batch, give TorchTrainer's update over the whole batch: same loss, stats and gradient norm, same weights after
the AdamW step; also when one rank has no sequence, and after a checkpoint round trip.

How close is "same weights"? Two computations of one gradient agree only to float32 rounding, and the rounding
depends on the summation order: the SIMD width torch's kernels use (``ATEN_CPU_CAPABILITY`` default / avx2 /
avx512), the thread count, and the split over two ranks. Adam turns that rounding into weight differences
unevenly: its first step is ``-lr * g / (|g| + eps)``, flat (about ``lr``) where ``|g| >> eps`` and steep
(slope ``lr / (4 eps)``) where ``|g|`` is near ``eps = 1e-8``, so a 6e-10 rounding of a 2e-8 gradient moves a
weight by 6e-6 = 0.6 % of ``lr``. A fixed per-weight tolerance therefore holds on one CPU's kernels only. The
weights are compared per element against :func:`adam_step_spread`: how far apart Adam's update can land when
every gradient is known only to within ``GRAD_REL_ERR`` of the largest one (the loss, statistics and gradient
norm are compared tightly as well). To reproduce a failure on another kernel path, run this file with
``ATEN_CPU_CAPABILITY=default`` or ``avx2`` (see docs/testing.md)."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import faulthandler
import importlib.util
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from maigym_ray.rl.packing import PackedSequence, micro_batches
from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig, collate, token_logprobs

pytestmark = [
    pytest.mark.integration,
    pytest.mark.numeric,
    pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"),
]

WORLD = 2
STAGES = (2, 3)
#: lr large enough for every trained weight to move visibly, clip low enough to bind.
CFG = TrainerConfig(lr=1e-3, grad_clip=0.5, token_budget=64)
#: How far two float32 computations of the same gradient may differ, relative to its largest element. Measured
#: at most 4.3e-7 between the three kernel paths and thread counts 1 and 2 (TorchTrainer alone); the bound
#: keeps a 20x margin for the two-rank reduction on top.
GRAD_REL_ERR = 1e-5
#: How far Adam's own float32 arithmetic (sqrt, division, the lr product) may move one step, relative to lr,
#: for the same gradient: the kernels differ between a vectorised body and a scalar tail, and ZeRO steps flat
#: partitions, not the per-parameter tensors. Measured up to 2.7e-5 between the kernel paths.
UPDATE_REL_ERR = 1e-4


def tiny_model() -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    return Qwen2ForCausalLM(config).float()


def fixed_batch(model: torch.nn.Module) -> list[PackedSequence]:
    """8 sequences (prompt + response), the old logprobs the model's own perturbed by +-0.3 so that the ratio
    leaves the clip range on some tokens, advantages of both signs."""
    rng = random.Random(0)
    seqs = []
    for i, (n_prompt, n_resp) in enumerate(
        [(20, 9), (6, 4), (14, 12), (9, 3), (25, 6), (7, 8), (11, 5), (4, 2)]
    ):
        ids = [rng.randrange(1, 256) for _ in range(n_prompt + n_resp)]
        mask = [0] * n_prompt + [1] * n_resp
        seqs.append(
            PackedSequence(tuple(ids), tuple(mask), (0.0,) * len(ids), (1.0, -0.5)[i % 2], f"e{i}", (0,))
        )
    with torch.no_grad():
        b = collate(seqs)
        logp = token_logprobs(model, b["input_ids"], b["attention_mask"])
    out = []
    for i, s in enumerate(seqs):
        old = [0.0] + [
            float(lp) + rng.uniform(-0.3, 0.3) if m else 0.0
            for lp, m in zip(logp[i, : len(s) - 1], s.loss_mask[1:], strict=True)
        ]
        out.append(PackedSequence(s.input_ids, s.loss_mask, tuple(old), s.advantage, s.episode_id, s.steps))
    return out


def torch_grad_norm(model: torch.nn.Module, seqs: list[PackedSequence]) -> float:
    """The gradient norm of TorchTrainer's loss over ``seqs``, before clipping."""
    m = copy.deepcopy(model)
    trainer = TorchTrainer(m, dataclasses.replace(CFG, grad_clip=0.0))
    trainer.opt = torch.optim.SGD(m.parameters(), lr=0.0)  # keep the gradients, not the step
    trainer.update(seqs)
    return float(torch.cat([p.grad.flatten() for p in m.parameters()]).norm())


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _gathered_weights(trainer: Any) -> dict[str, torch.Tensor]:
    import deepspeed

    # ZeRO-3 keeps only a shard of each weight on a rank; this is a no-op below stage 3
    with deepspeed.zero.GatheredParameters(list(trainer.model.parameters())):
        return _weights(trainer.model)


def _run_stage(trainer: Any, rank: int, seqs: list[PackedSequence], ckpt: Path) -> dict:
    """Step 1 on this rank's half of ``seqs``; a checkpoint round trip; step 2 on ``seqs[0::2]``, held by
    rank 0 alone (rank 1 has no sequence)."""
    got: dict = {"step1": trainer.update(seqs[rank::WORLD])}
    got["grad_norm1"] = float(trainer.engine.get_global_grad_norm())  # over all ranks, before clipping
    got["weights1"] = _gathered_weights(trainer)
    got["adam_state"] = sum(s["exp_avg"].numel() for s in trainer.opt.optimizer.state.values())
    got["partition_gradients"] = bool(getattr(trainer.opt, "partition_gradients", False))
    got["local_weights"] = sum(getattr(p, "ds_tensor", p).numel() for p in trainer.model.parameters())
    # save, move the weights by another step, load: step 2 then starts from step 1's weights AND Adam moments
    trainer.save(ckpt)
    trainer.update(seqs[rank::WORLD])
    got["moved"] = any(not torch.equal(v, got["weights1"][k]) for k, v in _gathered_weights(trainer).items())
    trainer.load(ckpt)
    got["restored"] = all(torch.equal(v, got["weights1"][k]) for k, v in _gathered_weights(trainer).items())
    got["step2"] = trainer.update(seqs[0::2] if rank == 0 else [])
    got["grad_norm2"] = float(trainer.engine.get_global_grad_norm())
    got["weights2"] = _gathered_weights(trainer)
    return got


def _worker(rank: int, rdv: str, out: str, state: dict, seqs: list[PackedSequence]) -> None:
    """One rank: ``_run_stage`` for every ZeRO stage in turn (one process group: the imports dominate the
    runtime). Rank 0 writes what it saw to ``out``."""
    # a rank killed by a signal (an abort in gloo or at interpreter exit) leaves its Python stacks for run_ranks
    faulthandler.enable(open(Path(out).parent / f"rank{rank}.log", "w"), all_threads=True)
    # what a launcher (torchrun, the trainer actor) sets; DeepSpeed insists on LOCAL_RANK
    os.environ.update(
        DS_ACCELERATOR="cpu",
        GLOO_SOCKET_IFNAME="lo",
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(WORLD),
    )
    torch.set_num_threads(1)  # two ranks on two cores
    import torch.distributed as dist

    from maigym_ray.rl.deepspeed_trainer import DeepSpeedTrainer

    dist.init_process_group(
        "gloo",
        init_method=f"file://{rdv}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=60),
    )
    results = {}
    for stage in STAGES:
        model = tiny_model()
        model.load_state_dict(state)
        trainer = DeepSpeedTrainer(model, CFG, zero_stage=stage)
        results[stage] = _run_stage(trainer, rank, seqs, Path(out).parent / f"ckpt{stage}")
        trainer.engine.destroy()
    if rank == 0:
        torch.save(results, out)
    dist.destroy_process_group()
    # Leave without interpreter shutdown: under load a rank that finished every step sometimes aborted in exit's
    # C++ destructors ("terminate called without an active exception", no Python frame: a joinable std::thread
    # of torch's distributed runtime destroyed at exit), which failed the test after all its work was done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"


def run_ranks(tmp_path: Path, state: dict, seqs: list[PackedSequence], timeout_s: float = 100.0) -> dict:
    """Spawns the ranks (file rendezvous, gloo on loopback) and returns what rank 0 wrote."""
    import torch.multiprocessing as mp

    out = tmp_path / "rank0.pt"
    ctx = mp.spawn(_worker, args=(str(tmp_path / "rdv"), str(out), state, seqs), nprocs=WORLD, join=False)
    deadline = time.monotonic() + timeout_s
    try:
        while not ctx.join(timeout=1.0):
            assert time.monotonic() < deadline, "DeepSpeed ranks did not finish"
    except mp.ProcessExitedException as exc:
        logs = "\n".join(f"--- rank {r} ---\n{_tail(tmp_path / f'rank{r}.log')}" for r in range(WORLD))
        raise AssertionError(f"{exc}\n{logs}") from exc
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
    return torch.load(out, weights_only=False)


def adam_step_spread(grads: list[torch.Tensor], opt: torch.optim.Optimizer, delta: float) -> torch.Tensor:
    """Per element: how far apart (max - min, in units of lr) the bias-corrected, weight-decay-free Adam update
    ``m_hat / (sqrt(v_hat) + eps)`` after the gradients ``grads`` (k tensors of one shape, oldest first) can
    land when each gradient is known only to within +-``delta``. Exact for one step (the update is monotone in
    the gradient, so the ends of the interval bound it); for two steps it is the spread over a 5 x 5 grid of the
    gradient box, with a 25 % margin for what the grid misses."""
    (beta1, beta2), eps = opt.param_groups[0]["betas"], opt.param_groups[0]["eps"]
    offsets = torch.linspace(-delta, delta, 5 if len(grads) > 1 else 2)
    updates = []
    for combo in torch.cartesian_prod(*[offsets] * len(grads)).reshape(-1, len(grads)):
        m = v = torch.zeros_like(grads[0], dtype=torch.float64)
        for g, off in zip(grads, combo, strict=True):
            g = g.double() + float(off)
            m, v = beta1 * m + (1 - beta1) * g, beta2 * v + (1 - beta2) * g * g
        k = len(grads)
        updates.append((m / (1 - beta1**k)) / ((v / (1 - beta2**k)).sqrt() + eps))
    stacked = torch.stack(updates)
    spread = stacked.max(0).values - stacked.min(0).values
    return (spread * (1.25 if len(grads) > 1 else 1.0)).float()


def assert_same_weights(
    got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], tolerance: dict[str, torch.Tensor]
) -> None:
    """``got`` equals ``want`` per element within ``tolerance`` (plus 4 float32 ulps of the weight for the
    update's own rounding), and the tolerance is tight (under 1 % of lr) for most weights, so the comparison
    still tells a wrong update from a right one."""
    ulp = torch.finfo(torch.float32).eps
    for name, w in want.items():
        bound = tolerance[name] + 4 * ulp * w.abs() + 1e-9
        err = (got[name] - w).abs()
        worst = int((err - bound).argmax())
        assert bool((err <= bound).all()), (
            f"{name}[{worst}]: off by {float(err.flatten()[worst]):.3g}, allowed {float(bound.flatten()[worst]):.3g}"
        )
    tight = torch.cat([t.flatten() for t in tolerance.values()]) < 1e-2 * CFG.lr
    assert float(tight.float().mean()) > 0.75


def adam_tolerance(
    grads: list[dict[str, torch.Tensor]], opt: torch.optim.Optimizer
) -> dict[str, torch.Tensor]:
    """The per-weight tolerance of the weights after the Adam steps whose (clipped) gradients are ``grads``,
    one dict per step: per step, the spread of the update plus its own rounding, times lr, summed."""
    lr = opt.param_groups[0]["lr"]
    out: dict[str, torch.Tensor] = {}
    for name in grads[0]:
        history = [g[name] for g in grads]
        delta = GRAD_REL_ERR * max(float(g[name].abs().max()) for g in grads)
        out[name] = sum(
            lr * (adam_step_spread(history[: k + 1], opt, delta) + UPDATE_REL_ERR)
            for k in range(len(history))
        )
    return out


def recorded_update(
    trainer: TorchTrainer, seqs: list[PackedSequence]
) -> tuple[dict, dict[str, torch.Tensor]]:
    """``trainer.update(seqs)`` as it runs, plus the gradients its optimizer stepped with (after clipping)."""
    grads: dict[str, torch.Tensor] = {}
    names = {p: n for n, p in trainer.model.named_parameters()}

    def keep(opt: torch.optim.Optimizer, *_: Any) -> None:
        grads.update({names[p]: p.grad.detach().clone() for g in opt.param_groups for p in g["params"]})

    hook = trainer.opt.register_step_pre_hook(keep)
    try:
        return trainer.update(seqs), grads
    finally:
        hook.remove()


def assert_moved(after: dict[str, torch.Tensor], before: dict[str, torch.Tensor]) -> None:
    """Most weights moved by at least half of lr: the update was a real one."""
    step = torch.cat([(after[k] - before[k]).flatten() for k in before])
    assert float((step.abs() > 0.5 * CFG.lr).float().mean()) > 0.5


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """TorchTrainer's two steps (whole batch, then seqs[0::2]) and the DeepSpeed ranks' for every stage."""
    model = tiny_model()
    seqs = fixed_batch(model)
    # the ranks pack different numbers of micro-batches: reducing in every backward would mismatch here
    assert len({len(micro_batches(seqs[r::WORLD], CFG.token_budget)) for r in range(WORLD)}) == WORLD
    want: dict = {"weights0": _weights(model), "n_params": sum(p.numel() for p in model.parameters())}
    torch_model = copy.deepcopy(model)
    trainer = TorchTrainer(torch_model, CFG)
    (want["step1"], grads1), want["grad_norm1"] = recorded_update(trainer, seqs), torch_grad_norm(model, seqs)
    want["weights1"] = _weights(torch_model)
    want["grad_norm2"] = torch_grad_norm(torch_model, seqs[0::2])
    want["step2"], grads2 = recorded_update(trainer, seqs[0::2])
    want["weights2"] = _weights(torch_model)
    want["tolerance1"] = adam_tolerance([grads1], trainer.opt)
    want["tolerance2"] = adam_tolerance([grads1, grads2], trainer.opt)
    return {"torch": want, **run_ranks(tmp_path_factory.mktemp("ds"), want["weights0"], seqs)}


@pytest.mark.parametrize("stage", STAGES)
def test_zero_on_two_ranks_equals_one_torch_step_on_the_whole_batch(runs, stage):
    want, got = runs["torch"], runs[stage]
    for step in ("step1", "step2"):
        assert got[step]["loss"] == pytest.approx(want[step]["loss"], rel=1e-5, abs=1e-7), step
        assert got[step]["clip_frac"] == pytest.approx(want[step]["clip_frac"], rel=1e-6), step
        assert got[step]["tokens"] == want[step]["tokens"], step
    assert want["step1"]["clip_frac"] > 0
    # Adam's step hides a gradient off by a constant factor (a missing world-size factor): compare the norm
    assert got["grad_norm1"] == pytest.approx(want["grad_norm1"], rel=1e-5)
    assert got["grad_norm2"] == pytest.approx(want["grad_norm2"], rel=1e-5)
    assert want["grad_norm1"] > CFG.grad_clip  # the clip binds
    assert_same_weights(got["weights1"], want["weights1"], want["tolerance1"])
    assert_same_weights(got["weights2"], want["weights2"], want["tolerance2"])
    assert_moved(want["weights1"], want["weights0"])
    assert_moved(want["weights2"], want["weights1"])
    assert got["moved"] and got["restored"]


@pytest.mark.parametrize("stage", STAGES)
def test_zero_partitions_over_the_ranks(runs, stage):
    """Each rank keeps Adam state for about half the parameters; ZeRO-2 partitions the gradients too, ZeRO-3
    the weights (each weight's shard padded to a multiple of the world size)."""
    n, got = runs["torch"]["n_params"], runs[stage]
    assert got["adam_state"] <= n // WORLD + 64
    assert got["partition_gradients"] == (stage == 2)
    if stage == 3:
        assert got["local_weights"] <= n // WORLD + len(runs["torch"]["weights0"])
    else:
        assert got["local_weights"] == n


def test_torch_trainer_save_and_load_restore_model_and_optimizer(tmp_path):
    model = tiny_model()
    seqs = fixed_batch(model)
    trainer = TorchTrainer(model, CFG)
    trainer.update(seqs)
    trainer.save(tmp_path / "t")
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    trainer.update(seqs)
    after_two = {k: v.clone() for k, v in model.state_dict().items()}
    trainer.load(tmp_path / "t")
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())
    trainer.update(seqs)  # the restored Adam moments give the same second step
    assert all(torch.allclose(v, after_two[k], atol=0, rtol=0) for k, v in model.state_dict().items())


def test_the_drivers_deepspeed_strategy_matches_torch(ray_local, tmp_path):
    """``topology.trainer.strategy=deepspeed`` as the driver runs it: two TrainerGroup rank actors (ZeRO-2,
    gloo on loopback, met through Ray's GCS) train the batch dealt over them by episode and give TorchTrainer's loss and weights; rank 0's
    weights are the full state dict the engines get; save/load round-trips through a DeepSpeed checkpoint."""
    from maigym_ray.rl.strategies import strategy_options
    from maigym_ray.rl.trainer_group import TrainerGroup
    from maigym_ray.runtime.placement import Placement
    from maigym_ray.runtime.topology import TopologyConfig, TrainerPlacementConfig

    model = tiny_model()
    model.save_pretrained(tmp_path / "model")
    seqs = [dataclasses.replace(s, episode_id=f"ep{i}") for i, s in enumerate(fixed_batch(model))]
    topo = TopologyConfig(
        trainer=TrainerPlacementConfig(ranks=2, strategy="deepspeed", options={"zero_stage": 2})
    )
    pl = Placement(topo)
    group = TrainerGroup(
        str(tmp_path / "model"),
        CFG,
        "deepspeed",
        strategy_options(topo.trainer),
        [pl.trainer_rank(r) for r in range(2)],
    )
    reference = TorchTrainer(copy.deepcopy(model), CFG)
    # trainer.old_logprobs=round: the ranks' recomputed logprobs come back in the batch's order, as one trainer's
    recomputed = group.logprobs(seqs)
    assert [s.input_ids for s in recomputed] == [s.input_ids for s in seqs]
    for got_seq, want_seq in zip(recomputed, reference.logprobs(seqs), strict=True):
        assert got_seq.loss_mask == want_seq.loss_mask
        assert (
            max(abs(a - b) for a, b in zip(got_seq.old_logprobs, want_seq.old_logprobs, strict=True)) < 1e-5
        )
    want, grads = recorded_update(reference, seqs)
    got = group.update(seqs)
    assert abs(got["loss"] - want["loss"]) < 1e-5 and got["tokens"] == want["tokens"]
    weights = dict(group.weights())
    assert set(weights) == set(model.state_dict())
    assert_same_weights(weights, dict(reference.model.state_dict()), adam_tolerance([grads], reference.opt))
    moved = max(float((weights[n] - t).abs().max()) for n, t in model.state_dict().items())
    assert moved > 1e-4  # the update did something
    group.save(tmp_path / "ckpt")
    group.update(seqs)
    group.load(tmp_path / "ckpt")
    for name, t in dict(group.weights()).items():
        torch.testing.assert_close(t, weights[name], rtol=0, atol=0)
