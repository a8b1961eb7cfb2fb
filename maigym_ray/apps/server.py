"""AppServer: one process serving many instances' mocked apps, each instance on its own port (own origin).

A node runs one AppServer (as a Ray actor) for all of its environment instances, so an instance's actor does
not carry a web server and templates of its own. Each namespace is an :class:`AppHost` with its own state,
secret and loopback port; namespaces never see each other's state.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from maigym_ray.errors import AppError

# The web server and templates are imported when the first namespace is created: env actors deserialize this
# actor's handle (which imports this module) and must stay small.


class AppServer:
    """Creates, resets, inspects and closes per-instance app namespaces."""

    def __init__(self, bind: str = "127.0.0.1") -> None:
        self.bind = bind
        self._hosts: dict[str, Any] = {}
        self._owners: dict[str, str] = {}  # namespace -> the instance that created it

    def _host(self, ns: str) -> Any:
        host = self._hosts.get(ns)
        if host is None:
            raise AppError(f"no app namespace {ns[:8]!r} on this server")
        return host

    async def create(self, apps: list[str], owner: str = "") -> dict[str, Any]:
        """A new namespace hosting ``apps``: ``{"ns", "url", "apps", "secret"}``. ``owner`` (the env instance's
        id) lets :meth:`release` reclaim it when that instance dies without closing it."""
        from maigym_ray.apps.host import AppHost

        host = AppHost(apps, host=self.bind)
        await host.start()
        ns = uuid.uuid4().hex
        self._hosts[ns] = host
        if owner:
            self._owners[ns] = owner
        return {"ns": ns, "url": host.url, "apps": list(host.apps), "secret": host.secret}

    def reset(self, ns: str, seeds: dict[str, Any]) -> None:
        """Seeds and restores namespace ``ns`` (AppError on a bad seed)."""
        self._host(ns).reset(seeds)

    def state(self, ns: str) -> dict[str, Any]:
        """Namespace ``ns``'s app states."""
        return self._host(ns).state()

    async def close(self, ns: str) -> None:
        """Stops serving namespace ``ns``."""
        host = self._hosts.pop(ns, None)
        self._owners.pop(ns, None)
        if host is not None:
            await host.stop()

    async def release(self, owner: str) -> int:
        """Closes every namespace ``owner`` created; returns how many. A SIGKILLed env actor never calls
        :meth:`close`: without this its namespace (a server, a port, the app state) would stay for good."""
        mine = [ns for ns, o in self._owners.items() if o == owner]
        for ns in mine:
            await self.close(ns)
        return len(mine)

    def namespaces(self) -> int:
        """How many namespaces are open."""
        return len(self._hosts)

    def pid(self) -> int:
        """This process's id (for memory accounting)."""
        return os.getpid()
