"""The desktop guest agent's HTTP API: every route of :class:`~maigym_ray.envs.desktop.agent.Agent`, behind a
bearer token (the agent's process and its command line are in agent.py). Endpoints (JSON unless noted):

- ``GET /health``; ``GET /screenshot`` (PNG); ``GET /observe?screenshot=1`` (screenshot as base64, the
  window list and the Chromium page's elements in screen coordinates); ``POST /act`` (X input via xdotool:
  click, double click, drag, type, key, hotkey, scroll at screen coordinates or at an element id);
- ``POST /exec`` (argv, no shell by default, killed on timeout); ``GET|PUT /file?path=`` (confined to the home
  directory); ``GET /files`` (small text files under home);
- ``POST /session/launch`` (browser at a URL, editor, terminal); ``POST /session/reset`` (kill the session
  apps, restore home from the template, wipe or relaunch Chromium); ``POST /browser/navigate`` and
  ``/browser/back``.

Agent mistakes (an unknown element id, no text field focused) come back as ``{"error": "..."}`` with status
200; malformed requests get 400, forbidden paths 403, failures inside the desktop 500.
"""

from __future__ import annotations

import asyncio
import hmac
import os
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from maigym_ray.envs.desktop.home_dir import HomeDir


class AgentAPI(Protocol):
    """What the routes call of the agent (:class:`~maigym_ray.envs.desktop.agent.Agent`). A Protocol, not an
    import: agent.py serves this module's app, so importing it here would make the two modules a cycle."""

    token: str
    home: Path
    home_dir: HomeDir  # exec, files and the home's owner
    settle_timeout_s: float
    browser: Any  # a GuestBrowser
    _lock: asyncio.Lock  # the agent's one-operation-at-a-time lock, which the browser routes take too

    async def screenshot(self) -> bytes: ...
    async def observe(self, screenshot: bool = True) -> dict[str, Any]: ...
    async def act(self, a: dict[str, Any]) -> str: ...
    async def back(self) -> str: ...
    async def launch(self, app: str, url: str = "", path: str = "") -> str: ...
    async def reset_session(
        self, restore_home: bool = True, keep_browser: bool = True, url: str = ""
    ) -> None: ...


def make_app(agent: AgentAPI) -> web.Application:
    """The aiohttp application serving ``agent`` (bearer-token auth on every route)."""
    expected = f"Bearer {agent.token}".encode()

    @web.middleware
    async def auth(request: web.Request, handler: Any) -> web.StreamResponse:
        if not hmac.compare_digest(request.headers.get("Authorization", "").encode(), expected):
            return web.json_response({"error": "unauthorized"}, status=401)
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except PermissionError as exc:
            return web.json_response({"error": str(exc)}, status=403)
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": f"bad request: {exc!r}"}, status=400)
        except Exception as exc:  # a failure inside the desktop: the host turns 5xx into BackendError
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=500)

    async def body(request: web.Request) -> dict[str, Any]:
        data = await request.json() if request.can_read_body else {}
        if not isinstance(data, dict):
            raise ValueError("the body must be a JSON object")
        return data

    def path_of(request: web.Request) -> Path:
        path = request.query.get("path", "")
        full = agent.home_dir.resolve(path) if path else None
        if full is None:
            raise PermissionError(f"path {path!r} is outside the home directory")
        return full

    async def health(_r: web.Request) -> web.Response:
        return web.json_response({"ok": True, "browser": agent.browser.alive(), "pid": os.getpid()})

    async def screenshot(_r: web.Request) -> web.Response:
        return web.Response(body=await agent.screenshot(), content_type="image/png")

    async def observe(r: web.Request) -> web.Response:
        return web.json_response(await agent.observe(r.query.get("screenshot", "1") != "0"))

    async def act(r: web.Request) -> web.Response:
        b = await body(r)
        out: dict[str, Any] = {"error": await agent.act(b)}
        if b.get("observe"):  # act and observe in one round trip (the step path)
            out["observation"] = await agent.observe(bool(b.get("screenshot", True)))
        return web.json_response(out)

    async def run(r: web.Request) -> web.Response:
        b = await body(r)
        timeout = min(float(b.get("timeout_s", 30.0)), 600.0)
        res = await agent.home_dir.run_command(
            b["argv"], timeout, bool(b.get("shell", False)), b.get("cwd", ""), b.get("stdin", "")
        )
        return web.json_response(res)

    async def get_file(r: web.Request) -> web.Response:
        p = path_of(r)
        if not p.is_file():
            return web.json_response({"error": f"no file {r.query['path']!r}"}, status=404)
        return web.Response(body=p.read_bytes(), content_type="application/octet-stream")

    async def put_file(r: web.Request) -> web.Response:
        p = path_of(r)
        if p == agent.home:
            raise PermissionError("cannot write the home directory itself")
        p.parent.mkdir(parents=True, exist_ok=True)
        data = await r.read()
        p.write_bytes(data)
        agent.home_dir.give_to_terminal()
        return web.json_response({"path": p.relative_to(agent.home).as_posix(), "bytes": len(data)})

    async def files(r: web.Request) -> web.Response:
        max_bytes = int(r.query.get("max_bytes", "65536"))
        return web.json_response({"files": agent.home_dir.files(max_bytes, r.query.get("hidden") == "1")})

    async def launch(r: web.Request) -> web.Response:
        b = await body(r)
        return web.json_response({"error": await agent.launch(b["app"], b.get("url", ""), b.get("path", ""))})

    async def reset(r: web.Request) -> web.Response:
        b = await body(r)
        await agent.reset_session(
            bool(b.get("restore_home", True)), bool(b.get("keep_browser", True)), b.get("url", "")
        )
        return web.json_response({"error": ""})

    async def navigate(r: web.Request) -> web.Response:
        b = await body(r)
        async with agent._lock:
            await agent.browser.navigate(b["url"], agent.settle_timeout_s)
        return web.json_response({"error": ""})

    async def back(_r: web.Request) -> web.Response:
        return web.json_response({"error": await agent.back()})

    app = web.Application(middlewares=[auth], client_max_size=64 << 20)
    app.add_routes(
        [
            web.get("/health", health),
            web.get("/screenshot", screenshot),
            web.get("/observe", observe),
            web.post("/act", act),
            web.post("/exec", run),
            web.get("/file", get_file),
            web.put("/file", put_file),
            web.get("/files", files),
            web.post("/session/launch", launch),
            web.post("/session/reset", reset),
            web.post("/browser/navigate", navigate),
            web.post("/browser/back", back),
        ]
    )
    return app
