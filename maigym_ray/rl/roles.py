"""Roles: the live parts a training run's driver works over, brought up by the runtime's session
(maigym_ray/runtime/training.py) and handed to :class:`~maigym_ray.rl.driver.Driver` as one typed value.

The driver holds no model and starts nothing: the session places and starts these roles and tears them down
after the run; the driver only calls them. Left at their defaults they describe a driver with no roles, which
refuses to start (unit tests put stand-ins in their place).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the trainer group imports torch; the runtime builds Roles before it needs torch
    from maigym_ray.rl.trainer_group import TrainerGroup


@dataclass
class Roles:
    """The driver's roles; see the module docstring."""

    #: the EnvManager actor the rollouts lease their environments from.
    manager: Any = None
    #: the generation engine actors, which the trainer's weights are broadcast to after every update.
    engines: list[Any] = field(default_factory=list)
    #: the trainer ranks, driven as one group.
    trainer: TrainerGroup | None = None
    #: the ``.options()`` of the rollout Ray task, from the placement (None: Ray's defaults).
    task_options: dict[str, Any] | None = None
    #: the weight sync's collective backend: "gloo" on CPU, "nccl" between GPUs.
    sync_backend: str = "gloo"
    #: the weight sync's bucket size in MiB.
    bucket_mb: int = 8
    #: the engines and the trainer share GPUs, so the engines sleep through every train step.
    colocated: bool = False
