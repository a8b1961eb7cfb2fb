"""The desktop backend: a desktop (X display or VM) whose guest agent shows the mocked apps in Chromium and
runs an editor and a terminal, all driven with real X input.

The same for every provider: the provider brings the desktop up and resets it; everything else goes through
the agent's HTTP API (:class:`~maigym_ray.envs.desktop.client.AgentClient`). Element ids of the browser page
are the web backend's (``data-mg-id``) and the desktop's windows get ids ``w<xid>``; coordinates in actions are
normalised to 0..1000 of the screen. ``state()`` is the apps' state plus ``"desktop": {"files": [...]}``, the
small text files under the desktop's home, so verifiers can check files with the usual ``exists`` ops. A
task's ``initial_state["desktop"] = {"files": [{"path", "content"}]}`` seeds files on top of the home template.
"""

from __future__ import annotations

import asyncio
from typing import Any

from maigym_ray.envs.backend import Backend
from maigym_ray.envs.backends.web import AppsHandle
from maigym_ray.envs.config import DesktopBackendConfig
from maigym_ray.envs.desktop.client import AgentClient
from maigym_ray.envs.desktop.provider import DesktopProvider
from maigym_ray.errors import AppError, BackendError, TaskError
from maigym_ray.types import Action, Element, Observation, TaskSpec

#: Desktop programs ``open_app`` starts besides the mocked apps (which open in the browser).
DESKTOP_APPS = ("browser", "editor", "terminal")


def desktop_seed(initial_state: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Splits a task's initial state into the apps' seeds and the desktop's files."""
    seeds = dict(initial_state)
    desk = seeds.pop("desktop", {}) or {}
    files = desk.get("files", []) if isinstance(desk, dict) else None
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("content"), str)
        for f in files
    ):
        raise TaskError('initial_state["desktop"] must be {"files": [{"path": str, "content": str}, ...]}')
    return seeds, files


class DesktopBackend(Backend):
    """Mocked apps in the desktop's Chromium, plus an editor and a terminal, through the guest agent."""

    platform = "desktop"

    def __init__(self, cfg: DesktopBackendConfig, apps: AppsHandle, provider: DesktopProvider) -> None:
        self.cfg = cfg
        self.width, self.height = cfg.width, cfg.height
        self.apps = apps
        self.provider = provider
        self.client: AgentClient | None = None

    def _agent(self) -> AgentClient:
        if self.client is None:
            raise BackendError("the desktop is not started")
        return self.client

    async def start(self) -> None:
        if self.client is not None:
            return
        try:
            await self.apps.start()
        except OSError as exc:
            raise BackendError(f"app host failed to start: {exc}") from exc
        endpoint = await self.provider.start()
        self.client = AgentClient(endpoint, self.cfg.agent_timeout_s)

    def _app_url(self, name: str = "") -> str:
        return f"{self.apps.url}/{name}/" if name else f"{self.apps.url}/"

    async def reset(self, task: TaskSpec) -> None:
        seeds, files = desktop_seed(task.initial_state)
        try:
            await self.apps.reset(seeds)
        except AppError as exc:
            raise TaskError(f"task {task.id}: bad initial_state: {exc}") from exc
        agent = self._agent()
        agent.endpoint = await self.provider.reset()
        for f in files:
            try:
                await agent.put_file(f["path"], f["content"].encode())
            except PermissionError as exc:
                raise TaskError(f"task {task.id}: desktop file {f['path']!r}: {exc}") from exc
        await agent.navigate(self._app_url(task.start_app))

    async def observe(self) -> Observation:
        return self._observation(await self._agent().observe(self.cfg.screenshot))

    def _observation(self, snap: dict[str, Any]) -> Observation:
        lines: list[str] = []
        elements: list[Element] = []
        page = snap.get("browser")
        focused_app, url = "", ""
        for w in snap["windows"]:
            state = ", focused" if w["focused"] else ""
            lines.append(f'[{w["id"]}] window "{w["title"]}" ({w["app"]}{state})')
            elements.append(
                Element(
                    w["id"], "window", w["title"], w["x"] + w["w"] // 2, w["y"] + w["h"] // 2, w["w"], w["h"]
                )
            )
            if w["focused"]:
                focused_app = w["app"]
            if page is not None and page["window"] == w["id"]:
                url = page["url"]
                lines.append(f'page "{page["title"]}"')
                if page["a11y"]:
                    lines.append(page["a11y"])
                elements.extend(Element(**e) for e in page["elements"])
        app = focused_app
        if focused_app == "browser":
            first = url.split("/")[3] if url.startswith(self.apps.url) and url.count("/") >= 3 else ""
            app = first if first in self.apps.names else "browser"
        return Observation(
            platform=self.platform,
            screenshot=snap["png"],
            width=snap.get("width", self.width),
            height=snap.get("height", self.height),
            a11y="\n".join(lines),
            url=url,
            app=app,
            elements=tuple(elements),
        )

    def _target(self, a: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        """The agent's target arguments: an element id, or screen pixels from normalised coordinates."""
        if f"{prefix}id" in a:
            return {f"{prefix}id": a[f"{prefix}id"]}
        if f"{prefix}x" in a:
            return {
                f"{prefix}x": min(self.width - 1, a[f"{prefix}x"] * self.width / 1000),
                f"{prefix}y": min(self.height - 1, a[f"{prefix}y"] * self.height / 1000),
            }
        return {}

    def _input(self, action: Action) -> dict[str, Any] | None:
        """The agent input operation of an input action (None for the other actions)."""
        a, name = action.args, action.name
        if name == "click":
            return {"op": "click", **self._target(a)}
        if name == "type":
            return {"op": "type", "text": a["text"], "enter": bool(a.get("enter")), **self._target(a)}
        if name == "scroll":
            extra = {"amount": a["amount"]} if a.get("amount") else {}
            return {"op": "scroll", "direction": a["direction"], **extra, **self._target(a)}
        if name == "drag":
            return {"op": "drag", **self._target(a, "from_"), **self._target(a, "to_")}
        if name == "key":
            return {"op": "key", "key": a["key"]}
        if name == "hotkey":
            return {"op": "hotkey", "keys": list(a["keys"])}
        return None

    async def act_and_observe(self, action: Action) -> tuple[str, Observation]:
        op = self._input(action)
        if op is None:
            return await super().act_and_observe(action)
        error, snap = await self._agent().act_and_observe(screenshot=self.cfg.screenshot, **op)
        return error, self._observation(snap)

    async def act(self, action: Action) -> str:
        agent = self._agent()
        a, name = action.args, action.name
        op = self._input(action)
        if op is not None:
            return await agent.act(**op)
        if name == "open_app":
            app = a["name"]
            if app in self.apps.names:
                return await agent.launch("browser", url=self._app_url(app))
            if app in DESKTOP_APPS:
                return await agent.launch(app)
            return f"no app named {app!r}; apps: {', '.join([*self.apps.names, *DESKTOP_APPS])}"
        if name == "navigate_home":
            return await agent.launch("browser", url=self._app_url())
        if name == "navigate_back":
            return await agent.back()
        if name == "wait":
            await asyncio.sleep(min(float(a.get("seconds", 1.0)), self.cfg.wait_cap_s))
        return ""  # answer / terminate change nothing on screen (the EnvActor records them)

    async def state(self) -> dict[str, Any]:
        states = await self.apps.state()
        states["desktop"] = {"files": await self._agent().files(self.cfg.state_max_file_bytes)}
        return states

    async def health(self) -> bool:
        if self.client is None or not await self.provider.health():
            return False
        try:
            return bool((await self.client.health())["ok"])
        except Exception:  # health never raises
            return False

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
        await self.provider.close()
        await self.apps.close()
        self.client = None
