"""A user's backend in one file: a counter that ``click`` raises by one, registered without editing maigym_ray.

Use it from config with its builder's class path::

    env.pools.counter = {platform: web, backend: "counter_backend:build"}

(the module must be importable where the env actors run), or from Python with
``register_backend("counter", "counter_backend:build")`` and ``backend: counter``.
"""

from __future__ import annotations

from typing import Any

from maigym_ray.envs.backend import Backend
from maigym_ray.types import Action, Element, Observation, TaskSpec


class CounterBackend(Backend):
    """No device at all: the state is one number, the screen one button."""

    platform = "web"

    def __init__(self) -> None:
        self.count = 0
        self.alive = False

    async def start(self) -> None:
        self.alive = True

    async def reset(self, task: TaskSpec) -> None:
        self.count = int(task.initial_state.get("counter", {}).get("start", 0))

    async def observe(self) -> Observation:
        button = Element("1", "button", f"Count {self.count}", 50, 20, 80, 30)
        return Observation(
            platform=self.platform,
            screenshot=b"",  # a backend without pixels may leave the screenshot empty
            width=100,
            height=40,
            a11y=f'[1] button "Count {self.count}"',
            elements=(button,),
        )

    async def act(self, action: Action) -> str:
        if action.name == "click":
            self.count += 1
            return ""
        return f"{action.name} does nothing here; click the button"

    async def state(self) -> dict[str, Any]:
        return {"counter": {"count": self.count}}  # what the task's verifier reads

    async def health(self) -> bool:
        return self.alive

    async def close(self) -> None:
        self.alive = False


def build(pool: Any, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None) -> Backend:
    """The builder maigym_ray calls in each env actor: (pool config, apps, app bind address, node services)."""
    return CounterBackend()
