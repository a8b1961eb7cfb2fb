"""Session: brings up the roles of one run (Ray, the EnvManager, the engines, the trainer group) and tears
them down, in one place. Eval, collect, train and synth all go through it.

The topology is checked first (:func:`maigym_ray.runtime.topology.validate`): an impossible one is a
ConfigError before Ray starts. Every actor is created with the options :class:`Placement` builds, so what a
role asks Ray for is decided by the topology config alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from maigym_ray.config import EnvManagerConfig, PolicyConfig, RayConfig
from maigym_ray.rl.strategies import strategy_options
from maigym_ray.rollout import policy_kind
from maigym_ray.runtime.placement import Placement
from maigym_ray.runtime.topology import Demand, TopologyConfig, validate

log = logging.getLogger(__name__)


def pool_capacity(env: EnvManagerConfig) -> dict[str, int]:
    """Env instances the pools may hold, per platform (what the topology's env hosts must carry)."""
    out: Counter[str] = Counter()
    for pool in env.pools.values():
        out[pool.platform] += pool.max_size
    return dict(out)


@dataclass
class Session:
    """The live roles of one run; see the module docstring. Use ``start_*`` then ``stop``."""

    ray: RayConfig
    env: EnvManagerConfig
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    #: whether the run trains (the trainer's resources count towards the topology's demand).
    trains: bool = False

    def __post_init__(self) -> None:
        engines = self.policy.num_engines if policy_kind(self.policy.kind).engines else 0
        self.demand: Demand = validate(self.topology, pool_capacity(self.env), engines, self.trains)
        self.placement = Placement(self.topology, self.policy.num_engines)
        self.manager: Any = None
        self.engines: list[Any] = []
        self.trainer: Any = None
        self._groups: list[Any] = []
        self._started_ray = False

    # -- bring-up ------------------------------------------------------------------------------------------
    def init_ray(self) -> None:
        """Joins ``ray.address`` or starts a loopback-only local Ray (once)."""
        import ray

        from maigym_ray.runtime.ray_init import init_ray

        if not ray.is_initialized():
            init_ray(self.ray)
            self._started_ray = True

    async def start_envs(self, tasks: Any = None) -> Any:
        """Starts the EnvManager (its env actors placed by their pool's host kind); returns it, warm."""
        import ray

        from maigym_ray.envs.manager import EnvManager

        self.init_ray()
        self.manager = (
            ray.remote(EnvManager)
            .options(**self.placement.env_manager())
            .remote(
                self.env,
                tasks,
                actor_options=self.placement.env_actors(self.env),
                node_options=self.placement.node_services,
            )
        )
        await self.manager.start.remote(wait=True)
        return self.manager

    def start_engines(self) -> list[Any]:
        """Starts the engine actors of a run whose policy kind runs on engines (none otherwise); returns them,
        started."""
        import ray

        from maigym_ray.policy.engine import EngineActor

        if not policy_kind(self.policy.kind).engines:
            return []
        self.init_ray()
        cfg = replace(
            self.policy.engine,
            tensor_parallel_size=self.topology.engines.tensor_parallel_size,
            sleep_mode=self.topology.mode == "colocated",  # engines sleep while the trainer runs
        )
        env = cfg.process_env()
        for i in range(self.placement.engines):
            group = None
            if self.placement.needs_engine_group():
                group = self.placement.engine_group()
                self._groups.append(group)
                ray.get(group.ready())
            opts = self.placement.engine(env, group)
            self.engines.append(ray.remote(EngineActor).options(**opts).remote(cfg, i))
        ray.get([e.start.remote() for e in self.engines])
        return self.engines

    async def start(self, tasks: Any = None) -> tuple[Any, list[Any]]:
        """The EnvManager and the engines, brought up together; returns both."""
        self.init_ray()
        envs = asyncio.ensure_future(self.start_envs(tasks))
        try:
            engines = await asyncio.to_thread(self.start_engines)
        finally:
            await envs
        return self.manager, engines

    def start_trainer(self, model_dir: str, trainer_cfg: Any, seed: int = 0) -> Any:
        """The trainer group (rl/trainer_group.py): one actor per rank, placed by the topology."""
        from maigym_ray.rl.trainer_group import TrainerGroup

        self.init_ray()
        t = self.topology.trainer
        group = None
        if self.placement.needs_trainer_group():
            group = self.placement.trainer_group()
            self._groups.append(group)
            import ray

            ray.get(group.ready())
        options = [self.placement.trainer_rank(r, group) for r in range(t.ranks)]
        self.trainer = TrainerGroup(
            model_dir, trainer_cfg, t.strategy, strategy_options(t), options, seed, t.torch_threads
        )
        return self.trainer

    def driver_options(self) -> dict[str, Any]:
        """The driver actor's options."""
        return self.placement.driver()

    # -- tear-down -----------------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Stops the engines, the EnvManager (and its env actors) and the trainer group; keeps Ray up."""
        import ray
        from ray.util.placement_group import remove_placement_group

        for e in self.engines:
            try:
                await e.shutdown.remote()
            except ray.exceptions.RayError as exc:  # already gone (its node died): nothing to stop
                log.warning("engine shutdown failed: %s", exc)
            ray.kill(e)
        self.engines = []
        if self.manager is not None:
            try:
                await self.manager.shutdown.remote()
            except ray.exceptions.RayError as exc:
                log.warning("env manager shutdown failed: %s", exc)
            ray.kill(self.manager)
            self.manager = None
        if self.trainer is not None:
            await asyncio.to_thread(self.trainer.shutdown)
            self.trainer = None
        for g in self._groups:
            remove_placement_group(g)
        self._groups = []

    def shutdown_ray(self) -> None:
        """Shuts Ray down if this session started it (a Hydra multirun starts the next job in this process)."""
        import ray

        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
