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
from maigym_ray.errors import ActionParseError, ConfigError, TaskError, UnsupportedActionError
from maigym_ray.harness.actions import check_supported, parse_action
from maigym_ray.tasks.verifiers import run_verifier
from maigym_ray.types import Action, Observation, Reward, StepResult, TaskSpec


def build_backend(
    pool: PoolConfig,
    apps: list[str],
    app_bind: str = "127.0.0.1",
    browser_host: Any = None,
    app_server: Any = None,
) -> Backend:
    """The backend a pool asks for. Pages go to the node's BrowserHost and apps to its AppServer when given."""
    if pool.backend == "web":
        from maigym_ray.envs.backends.web import LocalApps, WebBackend

        if pool.web.browser == "shared" and browser_host is not None:
            from maigym_ray.envs.remote import RemotePage

            page: Any = RemotePage(browser_host)
        else:
            from maigym_ray.envs.backends.page import LocalPage

            page = LocalPage(pool.web.executable)
        if app_server is not None:
            from maigym_ray.envs.remote import RemoteApps

            app_handle: Any = RemoteApps(app_server, apps)
        else:
            app_handle = LocalApps(apps, app_bind)
        return WebBackend(pool.web, app_handle, page)
    raise ConfigError(f"backend {pool.backend!r} is not available; available: web")


class EnvActor:
    """Holds one Backend and the episode running on it: step counting, the agent's answer, termination."""

    def __init__(
        self,
        instance_id: str,
        pool: PoolConfig,
        apps: list[str],
        app_bind: str = "127.0.0.1",
        browser_host: Any = None,
        app_server: Any = None,
    ) -> None:
        self.instance_id = instance_id
        self.pool = pool
        self.backend = build_backend(pool, apps, app_bind, browser_host, app_server)
        self.task: TaskSpec | None = None
        self.steps = 0
        self.answer: str | None = None
        self.done = False
        self.episodes = 0

    async def start(self) -> dict[str, Any]:
        """Starts the backend; returns the actor's pid and platform."""
        await self.backend.start()
        return {"pid": os.getpid(), "platform": self.backend.platform}

    async def reset(self, task: TaskSpec) -> Observation:
        """Starts an episode of ``task`` from its initial state."""
        if self.backend.platform not in task.platforms:
            raise TaskError(
                f"task {task.id} does not run on {self.backend.platform} (it runs on {task.platforms})"
            )
        t0 = time.perf_counter()
        await self.backend.reset(task)
        self.task, self.steps, self.answer, self.done = task, 0, None, False
        self.episodes += 1
        obs = await self.backend.observe()
        return dataclasses.replace(obs, timings={**obs.timings, "reset_s": time.perf_counter() - t0})

    async def observe(self) -> Observation:
        """The current screen."""
        return await self.backend.observe()

    async def step(self, action: str | Action) -> StepResult:
        """Parses (if text) and performs one action; mistakes come back in ``last_action_error``."""
        if self.task is None:
            raise TaskError("step before reset: reset the instance to a task first")
        t0 = time.perf_counter()
        if self.done:
            obs = await self.backend.observe()
            return StepResult(
                dataclasses.replace(obs, last_action_error="the episode is over"),
                True,
                {"error": "the episode is over", "steps": self.steps},
            )
        error, parsed = "", None
        try:
            parsed = parse_action(action) if isinstance(action, str) else action
            check_supported(parsed, self.backend.platform)
            error = await self.backend.act(parsed)
        except (ActionParseError, UnsupportedActionError) as exc:
            error = str(exc)
        self.steps += 1
        if parsed is not None and not error:
            if parsed.name == "answer":
                self.answer = parsed.args["text"]
            elif parsed.name == "terminate":
                self.done = True
        truncated = not self.done and self.steps >= self.task.max_steps
        self.done = self.done or truncated
        obs = await self.backend.observe()
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
        return run_verifier(self.task.verifier, await self.backend.state(), self.answer)

    async def state(self) -> dict[str, Any]:
        """The apps' state (what verifiers read)."""
        return await self.backend.state()

    async def health(self) -> bool:
        """True when the backend answers."""
        return await self.backend.health()

    async def close(self) -> None:
        """Closes the backend (the manager kills the actor afterwards)."""
        await self.backend.close()
