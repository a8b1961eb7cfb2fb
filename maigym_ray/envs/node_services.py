"""NodeServices: the per-node process that hosts what every web instance on the node shares.

The EnvManager starts one on each node that hosts env actors, when the first of them lands there, and hands it
to every env actor on that node (placement: ``runtime/placement.py``, ``node_services``).

It holds the node's :class:`~maigym_ray.apps.server.AppServer` (every instance's mocked apps, a loopback port
each) and, when a pool shares the browser, its :class:`~maigym_ray.envs.browser_host.BrowserHost` (one
Chromium and one Playwright driver). One Ray actor for both, because each Ray worker process costs about
70 MB; env actors reach a service through ``call``.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from maigym_ray.apps.server import AppServer
from maigym_ray.envs.browser_host import BrowserHost
from maigym_ray.errors import MaigymError

# The Playwright driver is a node.js process; a 1 MB young generation keeps its heap about 25 MB smaller with
# no measurable cost on the step path (the driver mostly relays small protocol messages).
_NODE_OPTIONS = "--max-semi-space-size=1"


class NodeServices:
    """Hosts ``apps`` (an AppServer) and, with ``browser``, ``browser`` (a BrowserHost)."""

    def __init__(self, app_bind: str = "127.0.0.1", browser: bool = True, chromium: str = "") -> None:
        os.environ.setdefault("NODE_OPTIONS", _NODE_OPTIONS)
        # For the children launched from here (the Playwright driver, Chromium): glibc's default of 8 malloc
        # arenas per core mostly holds the driver's freed protocol buffers (screenshots pass through it).
        os.environ.setdefault("MALLOC_ARENA_MAX", "2")
        self.services: dict[str, Any] = {"apps": AppServer(app_bind)}
        if browser:
            self.services["browser"] = BrowserHost(chromium)

    async def call(self, service: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Calls a public method of one service (awaiting it when it is a coroutine)."""
        target = self.services.get(service)
        if target is None or method.startswith("_") or not callable(getattr(target, method, None)):
            raise MaigymError(f"node services have no {service}.{method}; services: {sorted(self.services)}")
        out = getattr(target, method)(*args, **kwargs)
        return await out if inspect.isawaitable(out) else out

    def node_id(self) -> str:
        """The Ray node this process runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    async def release(self, owner: str) -> dict[str, int]:
        """Reclaims what env instance ``owner`` held here (app namespaces, browser pages): the manager calls it
        when it kills or replaces an instance, since a SIGKILLed actor never closes them itself."""
        out = {}
        for name, service in self.services.items():
            out[name] = await service.release(owner)
        return out

    def held(self) -> dict[str, int]:
        """How many app namespaces and browser pages are open (for leak checks)."""
        out = {"apps": self.services["apps"].namespaces()}
        if "browser" in self.services:
            out["browser"] = self.services["browser"].pages()
        return out

    def pids(self) -> dict[str, int]:
        """This process's pid, and the shared Chromium's when there is one."""
        out = {"node_services": os.getpid()}
        if "browser" in self.services:
            out["browser"] = self.services["browser"].pids()["browser"]
        return out

    async def stop(self) -> None:
        """Stops the browser (the app namespaces die with the process)."""
        if "browser" in self.services:
            await self.services["browser"].stop()
