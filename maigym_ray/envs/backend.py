"""The Backend ABC: what every platform implements so the EnvActor can drive it.

Methods are async because every real backend waits on I/O (a browser, adb, a guest agent). Agent mistakes are
returned as an error string (they become ``last_action_error`` in the next observation); infrastructure
failures raise :class:`~maigym_ray.errors.BackendError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from maigym_ray.types import Action, Observation, TaskSpec


class Backend(ABC):
    """One environment instance's device: a browser page, a phone, or a desktop."""

    platform: str

    @abstractmethod
    async def start(self) -> None:
        """Brings the device up (idempotent). Raises BackendError when it cannot."""

    @abstractmethod
    async def reset(self, task: TaskSpec) -> None:
        """Puts the device and the task's apps into the task's initial state."""

    @abstractmethod
    async def observe(self) -> Observation:
        """Screenshot plus accessibility text of the current screen."""

    @abstractmethod
    async def act(self, action: Action) -> str:
        """Performs one action of the grammar. Returns "" or an agent-mistake message; raises BackendError."""

    async def act_and_observe(self, action: Action) -> tuple[str, Observation]:
        """``act`` then ``observe``; backends whose device is remote override it to save a round trip."""
        error = await self.act(action)
        return error, await self.observe()

    def episode_done(self) -> bool:
        """True when the device itself ended the episode (a suite page's own done flag, as of the last action).

        The mocked apps never do: their episodes end on ``terminate`` or the step limit."""
        return False

    @abstractmethod
    async def state(self) -> dict[str, Any]:
        """The apps' states as JSON (what verifiers read)."""

    @abstractmethod
    async def health(self) -> bool:
        """True when the device answers; never raises."""

    @abstractmethod
    async def close(self) -> None:
        """Releases every process and resource (idempotent, never raises)."""
