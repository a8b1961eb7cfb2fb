"""Proxies through which an env actor uses the per-node services living in other actors.

``RemotePage`` drives a page in the node's BrowserHost; ``RemoteApps`` uses a namespace of the node's
AppServer. A dead service actor surfaces as :class:`BackendError`, so the manager replaces the instance.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray.exceptions import RayActorError

from maigym_ray.errors import BackendError
from maigym_ray.types import Action


async def _remote(method: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return await method.remote(*args, **kwargs)
    except RayActorError as exc:
        raise BackendError(f"a node service died: {exc}") from exc


class RemotePage:
    """A page in the node's BrowserHost (same interface as LocalPage)."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.page_id = ""

    async def open(self, **driver_args: Any) -> None:
        self.page_id = await _remote(self.host.open, **driver_args)

    async def reset(self, url: str) -> None:
        await _remote(self.host.reset, self.page_id, url)

    async def observe(self, screenshot: bool = True) -> dict[str, Any]:
        return await _remote(self.host.observe, self.page_id, screenshot)

    async def act(self, action: Action) -> str:
        return await _remote(self.host.act, self.page_id, action)

    async def health(self) -> bool:
        try:
            return bool(await _remote(self.host.health, self.page_id))
        except BackendError:
            return False

    async def close(self) -> None:
        if self.page_id:
            try:
                await asyncio.wait_for(_remote(self.host.close_page, self.page_id), 5)
            except Exception:  # the host may be gone; its pages went with it
                pass


class RemoteApps:
    """A namespace of the node's AppServer (same interface as LocalApps)."""

    def __init__(self, server: Any, apps: list[str]) -> None:
        self.server = server
        self.wanted = apps
        self.ns = ""
        self.url = ""
        self.names: list[str] = []

    async def start(self) -> None:
        info = await _remote(self.server.create, self.wanted)
        self.ns, self.url, self.names = info["ns"], info["url"], info["apps"]

    async def reset(self, seeds: dict[str, Any]) -> None:
        await _remote(self.server.reset, self.ns, seeds)

    async def state(self) -> dict[str, Any]:
        return await _remote(self.server.state, self.ns)

    async def close(self) -> None:
        if self.ns:
            try:
                await asyncio.wait_for(_remote(self.server.close, self.ns), 5)
            except Exception:  # the server may be gone; the namespace went with it
                pass
