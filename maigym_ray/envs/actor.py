"""EnvActor: one environment instance (one Backend) and its current episode. Run as an async Ray actor.

The class itself is plain Python; the EnvManager wraps it with ``ray.remote(EnvActor).options(...)``. An agent
mistake (unparsable, unsupported or impossible action) becomes ``last_action_error`` in the next observation
and costs a step; a backend failure raises :class:`BackendError` for the manager to handle.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from maigym_ray.actions import check_supported, parse_action
from maigym_ray.envs.backend import Backend
from maigym_ray.envs.config import PoolConfig
from maigym_ray.envs.registry import build_backend
from maigym_ray.envs.remote import OwnedNode
from maigym_ray.errors import ActionParseError, BackendError, TaskError, UnsupportedActionError
from maigym_ray.tasks.verifiers import run_verifier
from maigym_ray.types import Action, Observation, Reward, StepResult, TaskSpec

# Modules Ray's serializer imports only to register serializers for their types (Ray Data's Arrow tables,
# pydantic models, starlette state); Ray skips each when it is missing. Env actors never send those types.
_SERIALIZER_ONLY_MODULES = ("pyarrow", "pydantic", "starlette")


def _skip_arrow_in_ray_worker() -> None:
    import sys

    import ray

    worker = getattr(ray, "_private", None) and ray._private.worker.global_worker
    if (
        worker is not None
        and getattr(worker, "mode", None) == ray.WORKER_MODE
        and "pyarrow" not in sys.modules
    ):
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # makes `import pyarrow` raise ImportError


class EnvActor:
    """Holds one Backend and the episode running on it: step counting, the agent's answer, termination."""

    def __init__(self) -> None:
        # The constructor takes no arguments on purpose. Ray's serializer imports pyarrow, pydantic and
        # starlette (about 25 MB of private memory per process) when a worker first deserializes arguments.
        # An env actor never sends those types, so in a Ray worker we block those imports before the first
        # arguments (those of `start`) arrive. At thousands of instances per cluster this is tens of GB.
        _skip_arrow_in_ray_worker()
        self.instance_id = ""
        self.backend: Backend | None = None
        self.task: TaskSpec | None = None
        self.steps = 0
        self.answer: str | None = None
        self.done = False
        self.episodes = 0
        self.node: Any = None

    def node_id(self) -> str:
        """The Ray node this actor runs on (the manager hands it that node's services)."""
        import ray

        return ray.get_runtime_context().get_node_id()

    async def services_node_id(self) -> str:
        """The Ray node of the node services this instance uses ("" without them)."""
        return await self.node.node_id.remote() if self.node is not None else ""

    async def start(
        self,
        instance_id: str,
        pool: PoolConfig,
        apps: list[str],
        app_bind: str = "127.0.0.1",
        node: Any = None,
        group: str = "",
    ) -> dict[str, Any]:
        """Builds (through the backend registry, envs/registry.py) and starts the backend the pool asks for;
        returns the actor's pid and platform. ``group``: the EnvGroup hosting this instance, if any."""
        self.instance_id = instance_id
        self.node = node
        # The builders open pages and app namespaces through ``node``; bound to this instance, the manager can
        # reclaim them if this actor is killed before it closes them.
        owned = OwnedNode(node, instance_id, group) if node is not None else None
        self.backend = build_backend(pool, apps, app_bind, owned)
        await self.backend.start()
        return {"pid": os.getpid(), "platform": self.backend.platform}

    def _backend(self) -> Backend:
        if self.backend is None:
            raise BackendError("the instance was not started")
        return self.backend

    async def reset(self, task: TaskSpec) -> Observation:
        """Starts an episode of ``task`` from its initial state."""
        platform = self._backend().platform
        if platform not in task.platforms:
            raise TaskError(f"task {task.id} does not run on {platform} (it runs on {task.platforms})")
        t0 = time.perf_counter()
        await self._backend().reset(task)
        self.task, self.steps, self.answer, self.done = task, 0, None, False
        self.episodes += 1
        obs = await self._backend().observe()
        return dataclasses.replace(obs, timings={**obs.timings, "reset_s": time.perf_counter() - t0})

    async def observe(self) -> Observation:
        """The current screen."""
        return await self._backend().observe()

    async def step(self, action: str | Action) -> StepResult:
        """Parses (if text) and performs one action; mistakes come back in ``last_action_error``."""
        if self.task is None:
            raise TaskError("step before reset: reset the instance to a task first")
        t0 = time.perf_counter()
        if self.done:
            obs = await self._backend().observe()
            return StepResult(
                dataclasses.replace(obs, last_action_error="the episode is over"),
                True,
                {"error": "the episode is over", "steps": self.steps},
            )
        error, parsed, obs = "", None, None
        try:
            parsed = parse_action(action) if isinstance(action, str) else action
            check_supported(parsed, self._backend().platform)
            error, obs = await self._backend().act_and_observe(parsed)
        except (ActionParseError, UnsupportedActionError) as exc:
            error = str(exc)
        self.steps += 1
        if parsed is not None and not error:
            if parsed.name == "answer":
                self.answer = parsed.args["text"]
            elif parsed.name == "terminate":
                self.done = True
        # A suite page that ended the episode itself (MiniWoB++'s WOB_DONE_GLOBAL) terminates it.
        self.done = self.done or self._backend().episode_done()
        truncated = not self.done and self.steps >= self.task.max_steps
        self.done = self.done or truncated
        if obs is None:  # the action never reached the device
            obs = await self._backend().observe()
        act_s = time.perf_counter() - t0
        obs = dataclasses.replace(obs, last_action_error=error, timings={**obs.timings, "step_s": act_s})
        info = {
            "action": parsed.to_text() if parsed else None,
            "error": error,
            "steps": self.steps,
            "truncated": truncated,
            "answer": self.answer,
        }
        return StepResult(obs, self.done, info)

    async def evaluate(self) -> Reward:
        """Runs the task's verifier on the apps' current state and the agent's answer."""
        if self.task is None:
            raise TaskError("evaluate before reset")
        return run_verifier(self.task.verifier, await self._backend().state(), self.answer)

    async def state(self) -> dict[str, Any]:
        """The apps' state (what verifiers read)."""
        return await self._backend().state()

    async def health(self) -> bool:
        """True when the backend answers."""
        return self.backend is not None and await self.backend.health()

    async def close(self) -> None:
        """Closes the backend (the manager kills the actor afterwards)."""
        if self.backend is not None:
            await self.backend.close()
