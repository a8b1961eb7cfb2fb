"""LeasedEnv: one leased instance seen as an EnvHandle (what ``run_episode`` talks to).

Reset and evaluate go through the EnvManager (the control plane); steps go straight to the instance's actor
(the data plane), so the manager is off the per-step path. A failure on the direct path is reported to the
manager, which replaces the instance, and surfaces as :class:`EnvUnavailableError`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray.exceptions import RayActorError

from maigym_ray.errors import BackendError, EnvTimeoutError, EnvUnavailableError
from maigym_ray.types import Observation, Reward, StepResult, TaskSpec


class LeasedEnv:
    """An EnvHandle over ``manager`` (an EnvManager actor handle) and one of its leases."""

    def __init__(self, manager: Any, lease: str, step_timeout_s: float = 30.0) -> None:
        self.manager = manager
        self.lease = lease
        self.step_timeout_s = step_timeout_s
        self._actor: Any = None

    @classmethod
    async def acquire(cls, manager: Any, platform: str = "web", step_timeout_s: float = 30.0) -> LeasedEnv:
        """Leases one instance of ``platform``."""
        (lease,) = await manager.request.remote(1, platform)
        return cls(manager, lease, step_timeout_s)

    async def reset(self, task: TaskSpec) -> Observation:
        obs = await self.manager.reset.remote(self.lease, task)
        if self._actor is None:  # a lease keeps its instance: a replaced one fails the lease
            self._actor = await self.manager.actor.remote(self.lease)
        return obs

    async def step(self, action: str) -> StepResult:
        if self._actor is None:
            return await self.manager.step.remote(self.lease, action)
        try:
            return await asyncio.wait_for(self._actor.step.remote(action), self.step_timeout_s)
        except (RayActorError, BackendError, TimeoutError) as exc:
            await self.manager.report_failure.remote(self.lease, f"step: {type(exc).__name__}")
            if isinstance(exc, TimeoutError):
                raise EnvTimeoutError(f"step took longer than {self.step_timeout_s}s") from exc
            raise EnvUnavailableError(f"the instance failed during step: {type(exc).__name__}") from exc

    async def evaluate(self) -> Reward:
        return await self.manager.evaluate.remote(self.lease)

    async def release(self) -> None:
        """Returns the instance to its pool."""
        await self.manager.release.remote(self.lease)
