"""Proxies through which an env actor uses the node's shared services (they live in the NodeServices actor).

``RemotePage`` drives a page of the node's BrowserHost; ``RemoteApps`` uses a namespace of its AppServer. A
dead services actor surfaces as :class:`BackendError`, so the manager replaces the instance.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray.exceptions import RayActorError

from maigym_ray.errors import BackendError
from maigym_ray.types import Action


class _Service:
    def __init__(self, node: Any, service: str) -> None:
        self.node = node
        self.service = service

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.node.call.remote(self.service, method, *args, **kwargs)
        except RayActorError as exc:
            raise BackendError(f"the node's services died: {exc}") from exc


class OwnedNode:
    """The node's NodeServices actor handle as one env instance uses it: every page and app namespace opened
    through it is held under ``owner`` (the instance id), so the manager can reclaim them when the instance dies
    without closing them. Backend builders get it as ``node`` and pass it on, so their signature stays
    ``(pool, apps, app_bind, node)``; anything else is forwarded to the actor handle."""

    def __init__(self, handle: Any, owner: str, group: str = "") -> None:
        self.handle = handle
        self.owner = owner
        #: the env actor group the instance lives in ("" for an actor of its own): envs/group.py
        self.group = group

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


class RemotePage:
    """A page in the node's BrowserHost (same interface as LocalPage). ``owner`` is the env instance's id, under
    which the manager reclaims the page if the instance dies without closing it."""

    def __init__(self, node: Any, owner: str | None = None, share_context: bool = False) -> None:
        self._s = _Service(node, "browser")
        self.owner = getattr(node, "owner", "") if owner is None else owner
        # with share_context, the pages of one env actor group share a browser context (BrowserHost.open)
        self.context_group = getattr(node, "group", "") if share_context else ""
        self.page_id = ""

    async def open(self, **driver_args: Any) -> None:
        self.page_id = await self._s.call(
            "open", owner=self.owner, context_group=self.context_group, **driver_args
        )

    async def reset(self, url: str) -> None:
        await self._s.call("reset", self.page_id, url)

    async def observe(self, screenshot: bool = True) -> dict[str, Any]:
        return await self._s.call("observe", self.page_id, screenshot)

    async def act(self, action: Action) -> str:
        return await self._s.call("act", self.page_id, action)

    async def act_and_observe(self, action: Action, screenshot: bool = True) -> tuple[str, dict[str, Any]]:
        return await self._s.call("act_and_observe", self.page_id, action, screenshot)

    async def evaluate(self, script: str, arg: Any = None) -> Any:
        return await self._s.call("evaluate", self.page_id, script, arg)

    async def health(self) -> bool:
        try:
            return bool(await self._s.call("health", self.page_id))
        except BackendError:
            return False

    async def close(self) -> None:
        if self.page_id:
            try:
                await asyncio.wait_for(self._s.call("close_page", self.page_id), 5)
            except Exception:  # the services may be gone; the page went with them
                pass


class RemoteApps:
    """A namespace of the node's AppServer (same interface as LocalApps). ``owner`` as for RemotePage."""

    def __init__(self, node: Any, apps: list[str], owner: str | None = None) -> None:
        self._s = _Service(node, "apps")
        self.owner = getattr(node, "owner", "") if owner is None else owner
        self.wanted = apps
        self.ns = ""
        self.url = ""
        self.names: list[str] = []

    async def start(self) -> None:
        info = await self._s.call("create", self.wanted, owner=self.owner)
        self.ns, self.url, self.names = info["ns"], info["url"], info["apps"]

    async def reset(self, seeds: dict[str, Any]) -> None:
        await self._s.call("reset", self.ns, seeds)

    async def state(self) -> dict[str, Any]:
        return await self._s.call("state", self.ns)

    async def close(self) -> None:
        if self.ns:
            try:
                await asyncio.wait_for(self._s.call("close", self.ns), 5)
            except Exception:  # the services may be gone; the namespace went with them
                pass
