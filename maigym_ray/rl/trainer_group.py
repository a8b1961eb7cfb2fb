"""The DeepSpeed strategy as Ray actors: ``num_workers`` data-parallel ranks, each a DeepSpeedTrainer.

The driver owns the plain-torch trainer in its own process; with ``trainer.strategy=deepspeed`` it owns a
:class:`DeepSpeedGroup` instead, which has the same surface (update, set_lr, weights, reference, save, load).
Each worker joins its own torch process group (the ranks' ZeRO collectives), which is why the workers are
separate processes: the driver's default process group is the weight-broadcast group. After an update, rank 0
hands the full weights to the driver, which broadcasts them to the engines. ZeRO-1/2 keep the full model on
every rank, so that hand-off needs no gather; ZeRO-3 is refused here for that reason.

On CPU (``DS_ACCELERATOR=cpu``) the ranks talk over gloo; on GPUs each worker holds one GPU and uses NCCL.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import torch

from maigym_ray.rl.packing import PackedSequence
from maigym_ray.rl.trainer import TrainerConfig


class TrainerWorker:
    """One DeepSpeed rank (a Ray actor)."""

    def __init__(
        self,
        model_dir: str,
        cfg: TrainerConfig,
        rank: int,
        world_size: int,
        init_method: str,
        zero_stage: int,
    ) -> None:
        from transformers import AutoModelForCausalLM

        from maigym_ray.rl.deepspeed_trainer import DeepSpeedTrainer

        cuda = torch.cuda.is_available()
        # DeepSpeed reads the rank layout from the environment; each worker sees one device, so LOCAL_RANK 0.
        os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": "0"})
        torch.distributed.init_process_group(
            "nccl" if cuda else "gloo", init_method=init_method, rank=rank, world_size=world_size
        )
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self.trainer = DeepSpeedTrainer(model, cfg, zero_stage=zero_stage, bf16=cuda)
        self.rank = rank

    def update(self, seqs: list[PackedSequence], objective: str) -> dict[str, float]:
        """This rank's share of one optimizer step (every rank must call it)."""
        return self.trainer.update(seqs, objective)

    def set_lr(self, lr: float) -> None:
        """Sets the learning rate."""
        self.trainer.set_lr(lr)

    def weights(self) -> list[tuple[str, torch.Tensor]]:
        """The full state dict (ZeRO-1/2 keep it on every rank), on the CPU."""
        return [(n, t.detach().float().cpu()) for n, t in self.trainer.model.state_dict().items()]

    def freeze_reference(self) -> None:
        """Keeps a frozen copy of the current weights as the KL reference."""
        ref = copy.deepcopy(self.trainer.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        self.trainer.ref_model = ref

    def save(self, path: str) -> None:
        """Writes this rank's part of a DeepSpeed checkpoint (and rank 0 the reference) to ``path``."""
        self.trainer.save(path)
        if self.rank == 0 and self.trainer.ref_model is not None:
            torch.save(self.trainer.ref_model.state_dict(), Path(path) / "reference.pt")

    def load(self, path: str) -> None:
        """Restores ``save``."""
        self.trainer.load(path)
        ref = Path(path) / "reference.pt"
        if ref.exists():
            self.freeze_reference()
            self.trainer.ref_model.load_state_dict(torch.load(ref, weights_only=True))


class DeepSpeedGroup:
    """The driver's handle on the DeepSpeed ranks; splits every batch over them by episode."""

    def __init__(
        self, model_dir: str, cfg: TrainerConfig, num_workers: int, zero_stage: int, init_method: str
    ) -> None:
        import ray

        if zero_stage not in (1, 2):
            raise ValueError(
                f"trainer.zero_stage={zero_stage}: the driver's DeepSpeed strategy supports 1 or 2"
            )
        cuda = torch.cuda.is_available()
        env = {"env_vars": {"DS_ACCELERATOR": "cuda" if cuda else "cpu"}}
        self.workers = [
            ray.remote(TrainerWorker)
            .options(num_cpus=0, num_gpus=1 if cuda else 0, runtime_env=env)
            .remote(model_dir, cfg, rank, num_workers, init_method, zero_stage)
            for rank in range(num_workers)
        ]
        ray.get([w.set_lr.remote(cfg.lr) for w in self.workers])  # waits until every rank is up

    def update(self, seqs: list[PackedSequence], objective: str = "grpo") -> dict[str, float]:
        """One optimizer step over ``seqs``, the episodes dealt round-robin to the ranks."""
        import ray

        episodes = sorted({s.episode_id for s in seqs})
        n = len(self.workers)
        parts = [{e for i, e in enumerate(episodes) if i % n == r} for r in range(n)]
        stats = ray.get(
            [
                w.update.remote([s for s in seqs if s.episode_id in part], objective)
                for w, part in zip(self.workers, parts, strict=True)
            ]
        )
        return stats[0]  # the ranks report the stats of the whole batch

    def set_lr(self, lr: float) -> None:
        """Sets every rank's learning rate."""
        import ray

        ray.get([w.set_lr.remote(lr) for w in self.workers])

    def weights(self) -> list[tuple[str, torch.Tensor]]:
        """Rank 0's full weights."""
        import ray

        return ray.get(self.workers[0].weights.remote())

    def freeze_reference(self) -> None:
        """Every rank keeps a frozen copy of its current weights as the KL reference."""
        import ray

        ray.get([w.freeze_reference.remote() for w in self.workers])

    def save(self, path: Path) -> None:
        """A DeepSpeed checkpoint in the directory ``path``."""
        import ray

        ray.get([w.save.remote(str(path)) for w in self.workers])

    def load(self, path: Path) -> None:
        """Restores ``save``."""
        import ray

        ray.get([w.load.remote(str(path)) for w in self.workers])

    def shutdown(self) -> None:
        """Stops the rank actors (they hold the ranks' process group and its rendezvous file)."""
        import ray

        for w in self.workers:
            ray.kill(w)
