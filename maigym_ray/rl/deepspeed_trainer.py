"""DeepSpeedTrainer: the same GRPO policy update as TorchTrainer, data parallel under DeepSpeed ZeRO.

Every rank holds the whole model, trains on its own shard of the batch's sequences, and ZeRO partitions the
optimizer state (stage 1), the gradients too (stage 2), or the weights too (stage 3) over the ranks. The
update is built to equal ONE plain AdamW step of TorchTrainer over the union of the ranks' shards:

* The loss normalisers (loss tokens, live sequences) are summed over all ranks before the floor at 1, so a
  rank's micro-batch loss is its share of the GLOBAL batch loss, not of its own shard's.
* DeepSpeed averages gradients over the data-parallel ranks, while the GRPO loss is a sum of the shards'
  shares: each rank's loss is multiplied by the world size to undo the average.
* ``gradient_accumulation_steps`` is 1, so ``engine.backward`` does not divide the loss (the micro-batch
  losses are already pre-normalised and only need summing), and every ``engine.step`` is a boundary.
* Each rank packs its shard into micro-batches on its own, so the ranks may have different numbers of them,
  yet ZeRO's collectives must pair up across ranks: ZeRO-2 reduces gradients inside every backward (with
  mismatched counts gloo aborts on a size mismatch; NCCL would hang), ZeRO-3 gathers weights inside every
  forward. So every rank runs as many micro-batches as the busiest one, padding with a dummy sequence whose
  loss mask is empty (a zero loss, a zero gradient; a rank with no sequence trains only that), and all the
  backward passes run inside ``engine.coalesce_grad_reduction()``, which reduces the accumulated gradients
  ONCE when the block exits instead of once per micro-batch.
* Gradient clipping (``gradient_clipping`` = ``cfg.grad_clip``) clips by the global norm with the formula of
  ``torch.nn.utils.clip_grad_norm_``, and the optimizer is a client ``torch.optim.AdamW`` with TorchTrainer's
  settings. DeepSpeed's own Adam (FusedAdam / DeepSpeedCPUAdam) would need a compiled op; torch's needs none
  and runs the same arithmetic as TorchTrainer's.

Communication: on the CPU accelerator (``DS_ACCELERATOR=cpu``) the backend is asked for as gloo, which ships
with torch: DeepSpeed's CPU accelerator would pick oneCCL whenever ``oneccl_bindings_for_pytorch`` is
importable, and that needs its own launcher environment. On GPUs it is the accelerator's (nccl). The process
group must exist already or be described by the env:// variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
and DeepSpeed insists on LOCAL_RANK too (torchrun and the deepspeed launcher set it).

Checked on CPU in fp32 with ZeRO-2 and ZeRO-3 (tests/integration/test_deepspeed.py); ``bf16`` (GPU only) is
not exercised there: it accumulates gradients in bf16, DeepSpeed's default for a bf16 model.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from maigym_ray.rl.packing import PackedSequence, micro_batches
from maigym_ray.rl.trainer import (
    TrainerConfig,
    add_by_staleness,
    autocast,
    collate,
    loss_counts,
    micro_batch_loss,
    sequence_logprobs,
    staleness_stats,
    trainable_parameters,
)

#: the padding micro-batch (see the module docstring): its loss mask is empty, so it adds a zero gradient.
_EMPTY = PackedSequence((0, 0), (0, 0), (0.0, 0.0), 0.0, "", ())


class DeepSpeedTrainer:
    """Holds the policy model wrapped in a DeepSpeed ZeRO engine, and (optionally) a frozen reference model.

    Every rank of the process group must construct it and call ``update``/``save``/``load`` together.
    """

    def __init__(
        self,
        model: Any,
        cfg: TrainerConfig | None = None,
        ref_model: Any = None,
        zero_stage: int = 2,
        bf16: bool = False,
        grammar: Any = None,
    ) -> None:
        import deepspeed
        from deepspeed.accelerator import get_accelerator

        self.cfg = cfg or TrainerConfig()
        #: rebuilds the token masks of replies sampled under a regex (see trainer.collate).
        self.grammar = grammar
        if zero_stage not in (1, 2, 3):
            # coalesce_grad_reduction (see the module docstring) exists for ZeRO 1-3 only.
            raise ValueError(f"zero_stage {zero_stage}: choose 1, 2 or 3")
        accelerator = get_accelerator()
        on_cpu = accelerator.device_name() == "cpu"
        if bf16 and on_cpu:
            raise ValueError("bf16 is for GPUs: the CPU path trains in fp32")
        if on_cpu:
            # DeepSpeed's torch backend JIT-compiles a shared-memory all-reduce at init whenever a compiler is
            # present, though only inference uses it: mark it unbuildable (the probed table persists, see
            # deepspeed.ops.__getattr__) so training needs no compiled op at all.
            deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        backend = "gloo" if on_cpu else accelerator.communication_backend_name()
        deepspeed.init_distributed(dist_backend=backend)
        self.ref_model = ref_model
        params = trainable_parameters(model, self.cfg.trainable_layers)
        opt = torch.optim.AdamW(params, lr=self.cfg.lr, weight_decay=0.0)
        config = {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1,
            "gradient_clipping": float(self.cfg.grad_clip),
            "zero_optimization": {"stage": zero_stage},
            "bf16": {"enabled": bf16},
            "steps_per_print": 1 << 30,
        }
        self.engine, self.opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
        self.model = self.engine.module
        self.world_size = torch.distributed.get_world_size()

    def _all_reduce(self, values: list[float], op: Any = None) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.engine.device)
        torch.distributed.all_reduce(t, op=op or torch.distributed.ReduceOp.SUM)
        return t.tolist()

    def logprobs(self, seqs: list[PackedSequence]) -> list[PackedSequence]:
        """This rank's ``seqs`` with the current weights' logprobs as old logprobs (ZeRO-1/2 keep the whole
        model on every rank, so no collective is needed)."""
        self.engine.eval()
        with autocast(self.cfg, self.engine.device):
            return sequence_logprobs(
                self.engine, seqs, self.cfg.token_budget, self.grammar, self.cfg.micro_batch_overhead
            )

    def set_lr(self, lr: float) -> None:
        """Sets the optimizer's learning rate (the SFT warm-up and RL use different ones)."""
        for g in self.opt.param_groups:
            g["lr"] = lr

    def update(self, seqs: list[PackedSequence], objective: str = "grpo") -> dict[str, float]:
        """One optimizer step over the union of every rank's ``seqs``; the stats are of that union.
        ``objective`` is "grpo" or "sft" (see trainer.micro_batch_loss)."""
        t0 = time.perf_counter()
        self.engine.train()
        tokens, live = loss_counts(seqs)
        tokens, live = self._all_reduce([tokens, live])
        total_tokens, total_seqs = max(1.0, tokens), max(1.0, live)
        mbs = micro_batches(seqs, self.cfg.token_budget, self.cfg.micro_batch_overhead)
        (most,) = self._all_reduce([len(mbs)], torch.distributed.ReduceOp.MAX)
        mbs += [[_EMPTY]] * (int(most) - len(mbs))
        loss_sum = kl_sum = clip_sum = 0.0
        by_staleness: dict[int, list[float]] = {}
        with self.engine.coalesce_grad_reduction():
            for mb in mbs:
                batch = {k: v.to(self.engine.device) for k, v in collate(mb, grammar=self.grammar).items()}
                with autocast(self.cfg, self.engine.device):
                    out = micro_batch_loss(
                        self.engine, batch, self.cfg, total_tokens, total_seqs, self.ref_model, objective
                    )
                self.engine.backward(out.loss * self.world_size)
                loss_sum += float(out.loss.detach())
                kl_sum += out.kl_sum
                clip_sum += out.clipped
                add_by_staleness(by_staleness, out.by_staleness)
        self.engine.step()
        # every rank the same staleness keys, 0 .. the largest any rank saw, summed over the ranks
        (top,) = self._all_reduce([float(max(by_staleness, default=-1))], torch.distributed.ReduceOp.MAX)
        keys = range(int(top) + 1)
        flat = self._all_reduce([v for k in keys for v in by_staleness.get(k, [0.0, 0.0])]) if keys else []
        by_staleness = {k: flat[2 * k : 2 * k + 2] for k in keys if flat[2 * k + 1] > 0}
        loss_sum, kl_sum, clip_sum, n = self._all_reduce(
            [loss_sum, kl_sum, clip_sum, float(sum(len(s) for s in seqs))]
        )
        return {
            "loss": loss_sum,
            "kl": kl_sum / total_tokens,
            "clip_frac": clip_sum / total_tokens,
            "tokens": n,
            "update_s": time.perf_counter() - t0,
            "grammar_mismatches": float(self.grammar.mismatches if self.grammar is not None else 0),
            **staleness_stats(by_staleness),
        }

    def save(self, path: str | Path) -> None:
        """Writes a DeepSpeed checkpoint (each rank its optimizer partition) to the directory ``path``."""
        self.engine.save_checkpoint(str(path))

    def load(self, path: str | Path) -> None:
        """Restores the model and optimizer state written by ``save``."""
        self.engine.load_checkpoint(str(path))
