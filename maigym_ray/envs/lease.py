"""LeasedEnv: one leased instance seen as an :class:`~maigym_ray.types.EnvHandle`, the one handle that
``run_episode`` and live task validation both drive.

Reset, evaluate and state go through the EnvManager (the control plane); steps go straight to the instance's actor
(the data plane), so the manager is off the per-step path. A failure on the direct path is reported to the
manager, which replaces the instance, and surfaces as :class:`EnvUnavailableError`; a Ray failure on the control
path (a dead manager, a lost object) surfaces as :class:`EnvUnavailableError` too, so every caller sees
infrastructure failures as one typed exception.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray.exceptions import RayActorError, RayError

from maigym_ray.errors import BackendError, EnvTimeoutError, EnvUnavailableError, MaigymError
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

    async def _control(self, op: str, *args: Any) -> Any:
        """``op`` on the manager for this lease. The manager's own typed errors (TaskError, InfraError, ...) pass
        as they are (Ray's wrapper of an actor's exception is an instance of it); any other Ray failure is the
        control plane's, so an infrastructure failure."""
        try:
            return await getattr(self.manager, op).remote(self.lease, *args)
        except MaigymError:
            raise
        except RayError as exc:
            raise EnvUnavailableError(f"{op} on lease {self.lease}: {type(exc).__name__}: {exc}") from exc

    async def reset(self, task: TaskSpec) -> Observation:
        obs = await self._control("reset", task)
        if self._actor is None:  # a lease keeps its instance: a replaced one fails the lease
            self._actor = await self._control("actor")
        return obs

    async def step(self, action: str) -> StepResult:
        if self._actor is None:
            return await self._control("step", action)
        try:
            return await asyncio.wait_for(self._actor.step.remote(action), self.step_timeout_s)
        except (RayActorError, BackendError, TimeoutError) as exc:
            await self.manager.report_failure.remote(self.lease, f"step: {type(exc).__name__}")
            if isinstance(exc, TimeoutError):
                raise EnvTimeoutError(f"step took longer than {self.step_timeout_s}s") from exc
            raise EnvUnavailableError(f"the instance failed during step: {type(exc).__name__}") from exc

    async def evaluate(self) -> Reward:
        return await self._control("evaluate")

    async def state(self) -> dict[str, Any]:
        return await self._control("state")

    async def release(self, broken: bool = False) -> None:
        """Returns the instance to its pool; ``broken`` (an infrastructure failure happened on it) has the manager
        replace it first."""
        if broken:
            await self.manager.report_failure.remote(self.lease, "infrastructure failure on the lease")
        await self.manager.release.remote(self.lease)
