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

from maigym_ray.config import PoolConfig
from maigym_ray.envs.backend import Backend
from maigym_ray.errors import ActionParseError, BackendError, ConfigError, TaskError, UnsupportedActionError
from maigym_ray.harness.actions import check_supported, parse_action
from maigym_ray.tasks.verifiers import run_verifier
from maigym_ray.types import Action, Observation, Reward, StepResult, TaskSpec


def build_backend(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None, owner: str = ""
) -> Backend:
    """The backend a pool asks for. With ``node`` (the NodeServices actor) the apps live there, and so does the
    page when the pool shares the browser, held under ``owner`` (the instance id, for the manager to reclaim);
    without it everything runs in this process."""
    if pool.backend == "web":
        from maigym_ray.envs.backends.web import LocalApps, WebBackend

        if pool.web.browser == "shared" and node is not None:
            from maigym_ray.envs.remote import RemotePage

            page: Any = RemotePage(node, owner)
        else:
            from maigym_ray.envs.backends.page import LocalPage

            page = LocalPage(pool.web.executable)
        if node is not None:
            from maigym_ray.envs.remote import RemoteApps

            app_handle: Any = RemoteApps(node, apps, owner)
        else:
            app_handle = LocalApps(apps, app_bind)
        return WebBackend(pool.web, app_handle, page)
    if pool.backend == "android":
        from maigym_ray.envs.backends.android import AndroidBackend
        from maigym_ray.envs.backends.web import LocalApps

        if node is not None:
            from maigym_ray.envs.remote import RemoteApps

            android_apps: Any = RemoteApps(node, apps, owner)
        else:
            android_apps = LocalApps(apps, app_bind)
        return AndroidBackend(pool.android, android_apps)
    if pool.backend == "desktop":
        from maigym_ray.envs.backends.desktop import DesktopBackend, build_provider
        from maigym_ray.envs.backends.web import LocalApps

        if node is not None:  # the desktop's Chromium reaches the node's AppServer (app_bind)
            from maigym_ray.envs.remote import RemoteApps

            desktop_apps: Any = RemoteApps(node, apps, owner)
        else:
            desktop_apps = LocalApps(apps, app_bind)
        return DesktopBackend(pool.desktop, desktop_apps, build_provider(pool.desktop))
    if pool.backend == "fake":  # tests and fault drills: no device, scripted screens, injected faults
        from maigym_ray.testing.fake_backend import FakeBackend

        return FakeBackend(pool.fake, pool.platform)
    if pool.backend in SUITE_BACKENDS:
        import importlib

        module, _, name = SUITE_BACKENDS[pool.backend].partition(":")
        return getattr(importlib.import_module(module), name)(pool, apps, app_bind, node, owner)
    raise ConfigError(
        f"backend {pool.backend!r} is not available; available: web, android, desktop, fake, "
        f"{', '.join(SUITE_BACKENDS)}"
    )


#: Backends of outside suites, by kind: the builder's "module:function" (imported only in the actor that uses it;
#: the function takes the same arguments as build_backend).
SUITE_BACKENDS: dict[str, str] = {"miniwob": "maigym_ray.suites.miniwob:build_backend"}


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

    async def start(
        self,
        instance_id: str,
        pool: PoolConfig,
        apps: list[str],
        app_bind: str = "127.0.0.1",
        node: Any = None,
    ) -> dict[str, Any]:
        """Builds and starts the backend the pool asks for; returns the actor's pid and platform."""
        self.instance_id = instance_id
        self.backend = build_backend(pool, apps, app_bind, node, instance_id)
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
