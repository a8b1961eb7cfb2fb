"""Trainer strategies: how the trainer ranks train, registered through the one plug-in mechanism (entry-point
group ``maigym_ray.trainer_strategies``): ``torch`` (one plain-torch rank) and ``deepspeed`` (ZeRO-1/2 data
parallel over the ranks), and any a package adds.

A strategy checks the topology's trainer section (``check``, at config time, before anything starts) and builds
one rank's trainer (``build``, inside the rank's actor). This module imports neither torch nor DeepSpeed until a
trainer is built, so the topology check stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import ConfigError
from maigym_ray.plugins import Registry, read_options


@dataclass(frozen=True)
class RankSetup:
    """What one rank's trainer is built from."""

    #: the HF model, on the CPU.
    model: Any
    #: the trainer's config (rl/trainer.TrainerConfig).
    cfg: Any
    #: the torch device the rank trains on.
    device: Any
    rank: int
    world_size: int
    #: the strategy's settings (its ``TrainerStrategy.options`` class, read from ``topology.trainer.options``;
    #: None for a strategy that takes none).
    options: Any
    #: the name the ranks meet under (weights/rendezvous.py).
    rendezvous: str
    #: the token grammar replies were sampled under (policy/grammar.py).
    grammar: Any


@dataclass(frozen=True)
class TrainerStrategy:
    """What a trainer strategy registers."""

    #: ``check(trainer, options, where)``: the topology's trainer section (runtime/topology.
    #: TrainerPlacementConfig) with the strategy's typed settings is one this strategy runs; ConfigError naming
    #: ``where``'s key otherwise.
    check: Callable[[Any, Any, str], None]
    #: ``build(setup) -> trainer``: one rank's trainer (update, logprobs, set_lr, model, save, load).
    build: Callable[[RankSetup], Any]
    #: the strategy's settings dataclass, which ``topology.trainer.options`` is read into
    #: (:func:`strategy_options`); None: it takes none.
    options: type | None = None


@dataclass
class DeepSpeedConfig:
    """The ``deepspeed`` strategy's settings (``topology.trainer.options``)."""

    #: the ZeRO stage: 1 (optimizer state sharded) or 2 (gradients too). Not 3: it shards the weights, and rank
    #: 0 hands the full weights to the engines.
    zero_stage: int = 2


def _accept(name: str, obj: Any) -> TrainerStrategy:
    if not isinstance(obj, TrainerStrategy):
        raise ConfigError(f"trainer strategy {name!r} is a {type(obj).__name__}, not a TrainerStrategy")
    return obj


#: Trainer strategies by name.
TRAINER_STRATEGIES: Registry[TrainerStrategy] = Registry("trainer_strategies", "trainer strategy", _accept)


def strategy_options(trainer: Any, where: str = "topology.trainer") -> Any:
    """``trainer.options`` (a TrainerPlacementConfig's) read into its strategy's settings class; an unknown key
    or a wrong type is a ConfigError naming ``where.options.KEY``."""
    strategy = TRAINER_STRATEGIES.load(trainer.strategy)
    return read_options(strategy.options, trainer.options, where, f"trainer strategy {trainer.strategy!r}")


def _check_torch(t: Any, options: Any, where: str) -> None:
    if t.ranks != 1:
        raise ConfigError(f"{where}.ranks={t.ranks}: strategy torch runs one rank; use deepspeed")


def _build_torch(s: RankSetup) -> Any:
    from maigym_ray.rl.trainer import TorchTrainer

    return TorchTrainer(s.model.to(s.device), s.cfg, grammar=s.grammar)


def _check_deepspeed(t: Any, options: DeepSpeedConfig, where: str) -> None:
    # ZeRO-3 shards the weights: rank 0 could not hand out the full model
    if options.zero_stage not in (1, 2):
        raise ConfigError(
            f"{where}.options.zero_stage={options.zero_stage}: the DeepSpeed strategy supports 1 or 2"
        )


def _build_deepspeed(s: RankSetup) -> Any:
    import torch

    from maigym_ray.rl.deepspeed_trainer import DeepSpeedTrainer
    from maigym_ray.weights import rendezvous as meet

    cuda = s.device.type == "cuda"
    # DeepSpeed reads the rank layout from the environment; each rank sees one device, so LOCAL_RANK 0.
    os.environ.update({"RANK": str(s.rank), "WORLD_SIZE": str(s.world_size), "LOCAL_RANK": "0"})
    store, _ = meet.store_for(s.rendezvous, s.rank, s.world_size)
    torch.distributed.init_process_group(
        "nccl" if cuda else "gloo", store=store, rank=s.rank, world_size=s.world_size
    )
    trainer = DeepSpeedTrainer(s.model, s.cfg, zero_stage=s.options.zero_stage, bf16=cuda, grammar=s.grammar)
    trainer._store = store  # rank 0 hosts the store: it must live as long as the group
    return trainer


TORCH = TrainerStrategy(check=_check_torch, build=_build_torch)
DEEPSPEED = TrainerStrategy(check=_check_deepspeed, build=_build_deepspeed, options=DeepSpeedConfig)
