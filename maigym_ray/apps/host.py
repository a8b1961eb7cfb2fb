"""The app host: serves one instance's mocked apps over HTTP on loopback, with secret-guarded control endpoints.

One host holds one state namespace (one environment instance): its own App objects. Screens are under
``/<app>/``, the launcher ("home screen") is ``/``. The control endpoints ``/_control/{reset,state,seed}`` need
the header ``X-Maigym-Secret``; without it they answer 403, so an agent that types their URL into the browser
learns nothing. In-process callers (the web backend) use :meth:`reset` and :meth:`state` directly.
"""

from __future__ import annotations

import hmac
import html
import json
import secrets
from pathlib import Path
from typing import Any

from aiohttp import web

from maigym_ray.apps.app import App, Redirect, Request
from maigym_ray.apps.registry import make_apps
from maigym_ray.errors import AppError, BackendError

SECRET_HEADER = "X-Maigym-Secret"
_STATIC = Path(__file__).parent / "static"


class AppHost:
    """Serves ``apps`` for one environment instance. ``host`` defaults to loopback (127.0.0.1)."""

    def __init__(
        self, apps: list[str], host: str = "127.0.0.1", port: int = 0, secret: str | None = None
    ) -> None:
        self.apps: dict[str, App] = make_apps(apps)
        self.host = host
        self.port = port
        self.secret = secret or secrets.token_hex(16)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """Base URL of the running host, e.g. ``http://127.0.0.1:41234``."""
        return f"http://{self.host}:{self.port}"

    # -- in-process control ---------------------------------------------------------------------------------
    def reset(self, seeds: dict[str, Any] | None = None) -> None:
        """Seeds the given apps (others go back to their default seed), then restores every snapshot."""
        seeds = seeds or {}
        if not isinstance(seeds, dict):
            raise AppError(f"seeds must be an object keyed by app name, got {type(seeds).__name__}")
        unknown = set(seeds) - set(self.apps)
        if unknown:
            raise AppError(f"no such app on this host: {sorted(unknown)}; hosted: {sorted(self.apps)}")
        # validate every seed before applying any, so a bad seed never leaves the apps half reset
        checked = {name: app.validated(seeds.get(name, {})) for name, app in self.apps.items()}
        for name, app in self.apps.items():
            app.seed(checked[name])

    def restore(self) -> None:
        """Restores every app to its last seed without re-validating (the fast reset path)."""
        for app in self.apps.values():
            app.reset()

    def state(self) -> dict[str, Any]:
        """All apps' states, keyed by app name."""
        return {name: app.state() for name, app in self.apps.items()}

    # -- HTTP -----------------------------------------------------------------------------------------------
    def _authorised(self, request: web.Request) -> bool:
        given = request.headers.get(SECRET_HEADER, "")
        return hmac.compare_digest(given.encode(), self.secret.encode())

    async def _control(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return web.Response(status=403, text="forbidden")
        op = request.match_info["op"]
        if op == "state" and request.method == "GET":
            return web.json_response(self.state())
        if op in ("reset", "seed") and request.method == "POST":
            try:
                body = await request.json() if request.can_read_body else {}
                if op == "seed":
                    self.reset(body.get("seeds", {}) if isinstance(body, dict) else body)
                else:
                    self.restore()
            except (ValueError, AppError) as exc:
                return web.json_response({"ok": False, "error": str(exc)}, status=400)
            return web.json_response({"ok": True})
        return web.Response(status=404, text="unknown control operation")

    async def _home(self, request: web.Request) -> web.Response:
        from maigym_ray.apps.app import _TEMPLATES

        html = _TEMPLATES.get_template("home.html").render(apps=list(self.apps.values()))
        return web.Response(text=html, content_type="text/html")

    def _wrap(self, app: App, handler: Any) -> Any:
        async def run(request: web.Request) -> web.StreamResponse:
            form: dict[str, str] = {}
            lists: dict[str, list[str]] = {}
            if request.method == "POST":
                post = await request.post()
                for k in post:
                    vals = [str(v) for v in post.getall(k)]
                    lists[k] = vals
                    form[k] = vals[-1]
            req = Request(dict(request.match_info), dict(request.query), form, lists)
            try:
                out = handler(req)
            except KeyError as exc:  # an id that does not exist: a 404 screen the agent can see
                return web.Response(
                    status=404, text=f"Not found: {html.escape(str(exc))}", content_type="text/html"
                )
            if isinstance(out, Redirect):
                raise web.HTTPSeeOther(f"/{app.name}{out.path}")
            return web.Response(text=out, content_type="text/html")

        return run

    def make_web_app(self) -> web.Application:
        """The aiohttp application: launcher, static files, every app's routes and the control endpoints."""
        wa = web.Application()
        wa.router.add_get("/", self._home)
        wa.router.add_static("/static", _STATIC)
        wa.router.add_route("*", "/_control/{op}", self._control)
        for app in self.apps.values():
            for route in app.routes():
                path = f"/{app.name}{route.path}"
                wa.router.add_route(route.method, path, self._wrap(app, route.handler))
        return wa

    async def start(self) -> str:
        """Starts serving; returns the base URL (an ephemeral port unless one was given)."""
        self._runner = web.AppRunner(self.make_web_app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:  # e.g. a fixed port already in use: an infrastructure failure, said clearly
            await self._runner.cleanup()
            self._runner = None
            raise BackendError(
                f"the app host cannot listen on {self.host}:{self.port}: {exc.strerror}"
            ) from exc
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.url

    async def stop(self) -> None:
        """Stops serving."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def state_json(states: dict[str, Any]) -> str:
    """Canonical JSON of app states, for equality checks and hashing."""
    return json.dumps(states, sort_keys=True, separators=(",", ":"))
