"""The trainer as its own actor group: one Ray actor per rank, placed by the topology (runtime/placement.py).

The driver orchestrates and holds no model: it holds a :class:`TrainerGroup`, which has the trainer's surface
(update, set_lr, weights, freeze_reference, save, load) and forwards every call to the rank actors.

- strategy "torch": one rank, a plain-torch :class:`TorchTrainer`;
- strategy "deepspeed": ``ranks`` data-parallel ranks of a :class:`DeepSpeedTrainer` (ZeRO-1/2), which meet
  at rank 0's node IP (weights/rendezvous.py) and talk over NCCL on GPUs, gloo on CPU.

Each rank trains on the GPU Ray assigned it (Ray sets ``CUDA_VISIBLE_DEVICES``, so it is ``cuda:0`` inside the
rank) and falls back to the CPU when CUDA is absent, saying so in its log: a node that advertises GPUs it does
not have (this machine's test cluster) still exercises the placement. Rank 0 is also rank 0 of the weight
group (weights/group.py) and broadcasts straight to the engines; the weights never pass through the driver.
ZeRO-1/2 keep the full model on every rank, so that hand-off needs no gather (ZeRO-3 is refused for that).
"""

from __future__ import annotations

import copy
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import torch

from maigym_ray.policy.grammar import TokenGrammar
from maigym_ray.rl.packing import PackedSequence
from maigym_ray.rl.strategies import TRAINER_STRATEGIES, RankSetup
from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig

log = logging.getLogger(__name__)


def pick_device() -> tuple[torch.device, str]:
    """The device a rank trains on and why: its Ray-assigned GPU when CUDA is there, else the CPU."""
    import ray

    gpu_ids = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
    if torch.cuda.is_available():
        return torch.device("cuda:0"), f"cuda:0 (Ray GPU ids {gpu_ids})"
    if gpu_ids:
        why = f"cpu: Ray assigned GPU ids {gpu_ids} but CUDA is not available in this process"
        log.warning("trainer rank falls back to the CPU: %s", why)
        return torch.device("cpu"), why
    return torch.device("cpu"), "cpu (no GPU assigned)"


class TrainerRank:
    """One trainer rank (a Ray actor)."""

    def __init__(
        self,
        model_dir: str,
        cfg: TrainerConfig,
        strategy: str,
        rank: int,
        world_size: int,
        strategy_options: Any,
        rendezvous: str,
        seed: int = 0,
        torch_threads: int = 0,
    ) -> None:
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed)
        # Ray starts workers with one OpenMP thread; a rank trains while rollouts pause, so it takes them all.
        torch.set_num_threads(torch_threads or os.cpu_count() or 1)
        self.rank = rank
        self.device, self.device_reason = pick_device()
        print(f"trainer rank {rank}/{world_size} ({strategy}) trains on {self.device_reason}", flush=True)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        # replies sampled under a regex (policy.action_space) are scored under the same grammar; an unconstrained
        # run pays the tokenizer load only (the compiler is built on first use)
        grammar = TokenGrammar.from_model_dir(model_dir)
        # the strategy (rl/strategies.py, a plug-in kind) builds this rank's trainer; topology checked its settings
        setup = RankSetup(model, cfg, self.device, rank, world_size, strategy_options, rendezvous, grammar)
        self.trainer: Any = TRAINER_STRATEGIES[strategy].build(setup)

    def info(self) -> dict[str, Any]:
        """Where this rank runs: node, IP, device and Ray's GPU ids."""
        import ray

        ctx = ray.get_runtime_context()
        return {
            "rank": self.rank,
            "node_id": ctx.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "device": str(self.device),
            "device_reason": self.device_reason,
            "gpu_ids": ctx.get_accelerator_ids().get("GPU", []),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    def update(self, seqs: list[PackedSequence], objective: str) -> dict[str, float]:
        """This rank's share of one optimizer step (every rank must call it)."""
        return self.trainer.update(seqs, objective)

    def logprobs(self, seqs: list[PackedSequence]) -> list[PackedSequence]:
        """``seqs`` with this rank's current logprobs as old logprobs."""
        return self.trainer.logprobs(seqs)

    def set_lr(self, lr: float) -> None:
        """Sets the learning rate."""
        self.trainer.set_lr(lr)

    def weights(self) -> list[tuple[str, torch.Tensor]]:
        """The full state dict (ZeRO-1/2 keep it on every rank), on the CPU."""
        return [(n, t.detach().float().cpu()) for n, t in self._model().state_dict().items()]

    def _model(self) -> Any:
        return self.trainer.model

    def freeze_reference(self) -> None:
        """Keeps a frozen copy of the current weights as the KL reference."""
        if isinstance(self.trainer, TorchTrainer):
            self.trainer.freeze_reference()
            return
        ref = copy.deepcopy(self.trainer.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        self.trainer.ref_model = ref

    def save(self, path: str) -> None:
        """Writes this rank's part of a checkpoint (DeepSpeed: and rank 0 the reference) to ``path``."""
        self.trainer.save(path)
        if (
            not isinstance(self.trainer, TorchTrainer)
            and self.rank == 0
            and self.trainer.ref_model is not None
        ):
            torch.save(self.trainer.ref_model.state_dict(), Path(path) / "reference.pt")

    def load(self, path: str) -> None:
        """Restores ``save``."""
        self.trainer.load(path)
        ref = Path(path) / "reference.pt"
        if not isinstance(self.trainer, TorchTrainer) and ref.exists():
            self.freeze_reference()
            self.trainer.ref_model.load_state_dict(torch.load(ref, weights_only=True))

    # -- weight broadcast (rank 0) -------------------------------------------------------------------------
    def weight_layout(self, bucket_bytes: int) -> list[dict[str, Any]]:
        """The bucket layout of this rank's weights (what every receiver allocates)."""
        from maigym_ray.weights import group

        return group.layout(self._named(), bucket_bytes)

    def join_weight_group(self, world_size: int, group_name: str, backend: str) -> dict[str, Any]:
        """Joins the weight group as its rank 0."""
        from maigym_ray.weights import group

        return group.join(world_size, 0, group_name, backend)

    def send_weights(self, layout: list[dict[str, Any]], group_name: str) -> float:
        """Broadcasts the current weights to the group; returns seconds."""
        from maigym_ray.weights import group

        return group.send(self._named(), layout, group_name)

    def leave_weight_group(self, group_name: str) -> None:
        """Leaves the weight group."""
        from maigym_ray.weights import group

        group.leave(group_name)

    def _named(self) -> list[tuple[str, torch.Tensor]]:
        return [(n, t.detach()) for n, t in self._model().state_dict().items()]


class TrainerGroup:
    """The driver's handle on the trainer ranks; splits every batch over them by episode."""

    def __init__(
        self,
        model_dir: str,
        cfg: TrainerConfig,
        strategy: str,
        strategy_options: Any,
        options: list[dict[str, Any]],
        seed: int = 0,
        torch_threads: int = 0,
    ) -> None:
        """``strategy_options``: the strategy's typed settings (rl/strategies.strategy_options); ``options``: one
        Ray options dict per rank (runtime/placement.py)."""
        import ray

        rendezvous = f"ds-{uuid.uuid4().hex[:8]}"
        world = len(options)
        self.ranks = [
            ray.remote(TrainerRank)
            .options(**opts)
            .remote(model_dir, cfg, strategy, r, world, strategy_options, rendezvous, seed, torch_threads)
            for r, opts in enumerate(options)
        ]
        self.info = ray.get([w.info.remote() for w in self.ranks])  # waits until every rank is up
        ray.get([w.set_lr.remote(cfg.lr) for w in self.ranks])

    def update(self, seqs: list[PackedSequence], objective: str = "grpo") -> dict[str, float]:
        """One optimizer step over ``seqs``, the episodes dealt round-robin to the ranks."""
        import ray

        stats = ray.get(
            [w.update.remote(share, objective) for w, share in zip(self.ranks, self._deal(seqs), strict=True)]
        )
        return stats[0]  # the ranks report the stats of the whole batch

    def logprobs(self, seqs: list[PackedSequence]) -> list[PackedSequence]:
        """``seqs``, in order, with the current weights' logprobs as old logprobs (``old_logprobs: round``),
        the episodes dealt to the ranks as in :meth:`update`."""
        import ray

        shares = self._deal(seqs)
        done = ray.get([w.logprobs.remote(share) for w, share in zip(self.ranks, shares, strict=True)])
        by_id = {
            id(s): new for share, d in zip(shares, done, strict=True) for s, new in zip(share, d, strict=True)
        }
        return [by_id[id(s)] for s in seqs]

    def _deal(self, seqs: list[PackedSequence]) -> list[list[PackedSequence]]:
        """Each rank's share of ``seqs``: whole episodes, dealt round-robin in sorted episode order."""
        episodes = sorted({s.episode_id for s in seqs})
        rank_of = {e: i % len(self.ranks) for i, e in enumerate(episodes)}
        return [[s for s in seqs if rank_of[s.episode_id] == r] for r in range(len(self.ranks))]

    def set_lr(self, lr: float) -> None:
        """Sets every rank's learning rate."""
        import ray

        ray.get([w.set_lr.remote(lr) for w in self.ranks])

    def weights(self) -> list[tuple[str, torch.Tensor]]:
        """Rank 0's full weights (on the CPU)."""
        import ray

        return ray.get(self.ranks[0].weights.remote())

    def freeze_reference(self) -> None:
        """Every rank keeps a frozen copy of its current weights as the KL reference."""
        import ray

        ray.get([w.freeze_reference.remote() for w in self.ranks])

    def save(self, path: Path) -> None:
        """A checkpoint in the directory ``path`` (each rank writes its part; a shared filesystem on a cluster)."""
        import ray

        Path(path).mkdir(parents=True, exist_ok=True)
        ray.get([w.save.remote(str(path)) for w in self.ranks])

    def load(self, path: Path) -> None:
        """Restores ``save``."""
        import ray

        ray.get([w.load.remote(str(path)) for w in self.ranks])

    def layout(self, bucket_bytes: int) -> list[dict[str, Any]]:
        """Rank 0's weight bucket layout."""
        import ray

        return ray.get(self.ranks[0].weight_layout.remote(bucket_bytes))

    def join_weight_group(self, world_size: int, group_name: str, backend: str) -> Any:
        """Rank 0 joins the weight group as its rank 0; returns the call's ObjectRef (awaitable)."""
        return self.ranks[0].join_weight_group.remote(world_size, group_name, backend)

    def send_weights(self, layout: list[dict[str, Any]], group_name: str) -> Any:
        """Rank 0 broadcasts its weights; returns the call's ObjectRef (seconds)."""
        return self.ranks[0].send_weights.remote(layout, group_name)

    def shutdown(self) -> None:
        """Stops the rank actors."""
        import ray

        for w in self.ranks:
            ray.kill(w)
