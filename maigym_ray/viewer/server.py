"""The viewer's HTTP app (aiohttp): a JSON API over the run directories and the static front end.

Every response that carries run data is JSON; the front end puts untrusted strings (model output, page text,
config) into the page with ``textContent`` only, so markup in them shows as text. The app binds to loopback
(cli/view.py); it serves files only from its own static folder, and trajectory parts only by names the run
directory listing returned.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from pathlib import Path
from typing import Any

from aiohttp import web

from maigym_ray.viewer.episodes import EpisodeIndex, Filter, thumbnail
from maigym_ray.viewer.rundir import RunDir

STATIC = Path(__file__).parent / "static"
_THUMBS = 256  # cached thumbnails (about 20 KB each)
VIEWER: web.AppKey[Viewer] = web.AppKey("viewer")


class Viewer:
    """The runs a viewer shows and their episode indexes."""

    def __init__(self, run_dirs: list[str | Path]) -> None:
        self.runs = [RunDir(p) for p in run_dirs]
        self.indexes = [EpisodeIndex(r) for r in self.runs]
        self._thumbs: OrderedDict[tuple[Any, ...], bytes] = OrderedDict()

    def run(self, request: web.Request) -> int:
        i = int(request.match_info["run"])
        if not 0 <= i < len(self.runs):
            raise web.HTTPNotFound(text="no such run")
        return i

    def compare(self, a: int, b: int, split: str = "") -> dict[str, Any]:
        """Success per task of two runs side by side (infra-failed episodes are not scored)."""
        per: list[dict[str, list[int]]] = []
        for i in (a, b):
            tally: dict[str, list[int]] = {}
            for r in self.indexes[i].all():
                if r["infra_failed"] or (split and r["split"] != split):
                    continue
                t = tally.setdefault(r["task_id"], [0, 0])
                t[0] += int(r["success"])
                t[1] += 1
            per.append(tally)
        tasks = sorted(set(per[0]) | set(per[1]))

        def rate(t: list[int] | None) -> float | None:
            return t[0] / t[1] if t and t[1] else None

        rows = [
            {
                "task_id": tid,
                "a": rate(per[0].get(tid)),
                "a_n": per[0].get(tid, [0, 0])[1],
                "b": rate(per[1].get(tid)),
                "b_n": per[1].get(tid, [0, 0])[1],
            }
            for tid in tasks
        ]
        overall = [rate([sum(v[0] for v in p.values()), sum(v[1] for v in p.values())]) for p in per]
        return {"a": self.runs[a].name, "b": self.runs[b].name, "overall": overall, "tasks": rows}


def _int(q: Any, key: str, default: int) -> int:
    try:
        return int(q.get(key, default))
    except ValueError as e:
        raise web.HTTPBadRequest(text=f"{key} must be an integer") from e


def make_app(run_dirs: list[str | Path]) -> web.Application:
    """The aiohttp application for ``run_dirs``."""
    v = Viewer(run_dirs)
    routes = web.RouteTableDef()

    @routes.get("/")
    async def index(_: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    @routes.get("/api/runs")
    async def runs(_: web.Request) -> web.Response:
        return web.json_response(
            [{"id": i, "name": r.name, "path": str(r.path)} for i, r in enumerate(v.runs)]
        )

    @routes.get("/api/runs/{run}")
    async def run(request: web.Request) -> web.Response:
        i = v.run(request)
        return web.json_response(await asyncio.to_thread(v.runs[i].summary))

    @routes.get("/api/runs/{run}/episodes")
    async def episodes(request: web.Request) -> web.Response:
        i, q = v.run(request), request.query
        flt = Filter(
            app=q.get("app", ""),
            task=q.get("task", ""),
            split=q.get("split", ""),
            outcome=q.get("outcome", ""),
            round=q.get("round", ""),
            sort=q.get("sort", "order"),
            descending=q.get("desc", "") in ("1", "true"),
        )
        page = await asyncio.to_thread(v.indexes[i].query, flt, _int(q, "page", 0), _int(q, "size", 50))
        return web.json_response(page)

    @routes.get("/api/runs/{run}/episode")
    async def episode(request: web.Request) -> web.Response:
        i, q = v.run(request), request.query
        try:
            ep = await asyncio.to_thread(
                v.indexes[i].episode,
                q.get("store", ""),
                q.get("part", ""),
                _int(q, "row", 0),
                _int(q, "step", 0),
            )
        except KeyError as e:
            raise web.HTTPNotFound(text=str(e)) from e
        return web.json_response(ep)

    @routes.get("/api/runs/{run}/screenshot")
    async def screenshot(request: web.Request) -> web.Response:
        i, q = v.run(request), request.query
        key = (i, q.get("store", ""), q.get("part", ""), _int(q, "row", 0), _int(q, "step", 0))
        thumb = q.get("thumb", "") == "1"
        if thumb and key in v._thumbs:
            v._thumbs.move_to_end(key)
            return web.Response(body=v._thumbs[key], content_type="image/png")
        try:
            png = await asyncio.to_thread(v.indexes[i].screenshot, *key[1:])
        except KeyError as e:
            raise web.HTTPNotFound(text=str(e)) from e
        if not png:
            raise web.HTTPNotFound(text="this run kept no screenshot for this step")
        if thumb:
            png = await asyncio.to_thread(thumbnail, png)
            v._thumbs[key] = png
            while len(v._thumbs) > _THUMBS:
                v._thumbs.popitem(last=False)
        return web.Response(body=png, content_type="image/png")

    @routes.get("/api/compare")
    async def compare(request: web.Request) -> web.Response:
        q = request.query
        a, b = _int(q, "a", 0), _int(q, "b", 1)
        if not (0 <= a < len(v.runs) and 0 <= b < len(v.runs)):
            raise web.HTTPNotFound(text="no such run")
        return web.json_response(await asyncio.to_thread(v.compare, a, b, q.get("split", "")))

    routes.static("/static", STATIC)
    app = web.Application(middlewares=[_headers])
    app.add_routes(routes)
    app[VIEWER] = v
    return app


@web.middleware
async def _headers(request: web.Request, handler: Any) -> web.StreamResponse:
    """A content security policy that allows only the viewer's own scripts: even markup that slipped into
    the page could not run inline script."""
    resp = await handler(request)
    resp.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'"
    )
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp
