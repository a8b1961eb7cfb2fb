"""The web backend: a Chromium page (Playwright) on this instance's own namespace of the mocked apps.

The page lives in the node's shared BrowserHost (``shared``, the default: one Chromium per node, a context per
env) or in a Chromium the instance launches itself (``per_env``); the apps live in the node's AppServer or in
this process. Both are reached through small handles (``PageHandle``, ``AppsHandle``), so this module stays
free of Playwright and web-server imports and an env actor stays small. Desktop viewports use the mouse;
``mobile_web`` uses a phone viewport with touch emulation.
"""

from __future__ import annotations

from typing import Any, Protocol

from maigym_ray.envs.backend import Backend
from maigym_ray.envs.config import WebBackendConfig
from maigym_ray.errors import AppError, BackendError, TaskError
from maigym_ray.types import Action, Element, Observation, TaskSpec

_DEFAULT_SIZE = {"web": (1024, 768), "mobile_web": (390, 844)}


class PageHandle(Protocol):
    """A page the backend drives: in this process (LocalPage) or in the node's BrowserHost (RemotePage)."""

    async def open(self, **driver_args: Any) -> None: ...
    async def reset(self, url: str) -> None: ...
    async def observe(self, screenshot: bool = True) -> dict[str, Any]: ...
    async def act(self, action: Action) -> str: ...
    async def act_and_observe(
        self, action: Action, screenshot: bool = True
    ) -> tuple[str, dict[str, Any]]: ...
    async def health(self) -> bool: ...
    async def close(self) -> None: ...


class AppsHandle(Protocol):
    """The instance's app namespace: in this process (LocalApps) or in the node's AppServer (RemoteApps)."""

    url: str
    names: list[str]

    async def start(self) -> None: ...
    async def reset(self, seeds: dict[str, Any]) -> None: ...
    async def state(self) -> dict[str, Any]: ...
    async def close(self) -> None: ...


class LocalApps:
    """An AppHost inside this process."""

    def __init__(self, apps: list[str], bind: str = "127.0.0.1") -> None:
        from maigym_ray.apps.host import AppHost

        self.host = AppHost(apps, host=bind)
        self.names = list(self.host.apps)
        self.url = ""

    async def start(self) -> None:
        self.url = await self.host.start()

    async def reset(self, seeds: dict[str, Any]) -> None:
        self.host.reset(seeds)

    async def state(self) -> dict[str, Any]:
        return self.host.state()

    async def close(self) -> None:
        await self.host.stop()


class WebBackend(Backend):
    """Mocked apps in a browser page."""

    def __init__(self, cfg: WebBackendConfig, apps: AppsHandle, page: PageHandle) -> None:
        self.cfg = cfg
        self.platform = cfg.platform or "web"  # the builder gives the pool's; a bare config means web
        dw, dh = _DEFAULT_SIZE[self.platform]
        self.width, self.height = cfg.width or dw, cfg.height or dh
        self.apps = apps
        self.page = page
        self._started = False

    async def start(self) -> None:
        if self._started:
            return
        try:
            await self.apps.start()
        except OSError as exc:
            raise BackendError(f"app host failed to start: {exc}") from exc
        await self.page.open(
            width=self.width,
            height=self.height,
            mobile=self.platform == "mobile_web",
            base_url=self.apps.url,
            apps=list(self.apps.names),
            settle_timeout_s=self.cfg.settle_timeout_s,
            wait_cap_s=self.cfg.wait_cap_s,
            fresh_context=self.cfg.reset == "context",
        )
        self._started = True

    async def reset(self, task: TaskSpec) -> None:
        try:
            await self.apps.reset(task.initial_state)
        except AppError as exc:
            raise TaskError(f"task {task.id}: bad initial_state: {exc}") from exc
        await self.page.reset(f"{self.apps.url}/{task.start_app}/" if task.start_app else f"{self.apps.url}/")

    async def observe(self) -> Observation:
        return self._observation(await self.page.observe(self.cfg.screenshot))

    async def act_and_observe(self, action: Action) -> tuple[str, Observation]:
        error, snap = await self.page.act_and_observe(action, self.cfg.screenshot)
        return error, self._observation(snap)

    def _observation(self, snap: dict[str, Any]) -> Observation:
        url: str = snap["url"]
        first = url.split("/")[3] if url.count("/") >= 3 else ""
        return Observation(
            platform=self.platform,
            screenshot=snap["png"],
            width=self.width,
            height=self.height,
            a11y=f'page "{snap["title"]}"\n' + snap["a11y"],
            url=url,
            app=first if first in self.apps.names else "",
            elements=tuple(Element(**e) for e in snap["elements"]),
        )

    async def act(self, action: Action) -> str:
        return await self.page.act(action)

    async def state(self) -> dict[str, Any]:
        return await self.apps.state()

    async def health(self) -> bool:
        return await self.page.health()

    async def close(self) -> None:
        await self.page.close()
        await self.apps.close()
