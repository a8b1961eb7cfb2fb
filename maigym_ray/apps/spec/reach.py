"""Action reachability of a spec app: every action's button or link must show on some screen that the app's
home screen leads to by following links (an action no screen offers is one no agent and no golden solution
can ever take).

:func:`crawl` follows the links of any fetcher: the conformance test fetches over HTTP from the real app host,
the spec writer (``synth/spec_writer.py``) renders in process with :func:`render_get`, so both apply one rule.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from maigym_ray.apps.app import App, Redirect, Request
from maigym_ray.errors import AppError

_HREF = re.compile(r'href="([^"#]+)')
_IDS = re.compile(r'data-mg-id="([^"]+)"')
#: A crawl that finds more screens than this does not end (a link that makes new links, e.g. a page counter).
MAX_SCREENS = 400


async def crawl(fetch: Callable[[str], Awaitable[str]], app: str) -> dict[str, list[str]]:
    """Every screen of ``app`` reachable from its home screen ``/<app>/`` by links: path -> its element ids.
    ``fetch(path)`` returns a screen's HTML (and raises if it cannot); AppError when the crawl does not end."""
    seen: dict[str, list[str]] = {}
    todo = [f"/{app}/"]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        text = await fetch(path)
        seen[path] = _IDS.findall(text)
        if len(seen) >= MAX_SCREENS:
            raise AppError(f"{app}: the crawl does not end (over {MAX_SCREENS} screens)")
        todo += [p for p in _HREF.findall(text) if p.startswith(f"/{app}/")]
    return seen


def unreachable_actions(spec: dict[str, Any], screens: dict[str, list[str]]) -> list[str]:
    """The ids of ``spec``'s actions that no crawled screen shows."""
    visible = {i for ids in screens.values() for i in ids}
    return [a["id"] for a in spec["actions"] if a["id"] not in visible]


def _match(pattern: str, path: str) -> dict[str, str] | None:
    regex = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(pattern)) + "$"
    m = re.match(regex, path)
    return m.groupdict() if m else None


def render_get(app: App, url: str) -> str:
    """The HTML ``GET url`` (``/<app>/<path>?query``) serves, rendered in process (no server), redirects
    followed. AppError when no route serves it or its handler fails (what would be a 404 or 500 page)."""
    for _ in range(10):
        parts = urlsplit(url.replace("&amp;", "&"))
        prefix = f"/{app.name}"
        if not parts.path.startswith(prefix):
            raise AppError(f"{url}: not a screen of {app.name}")
        sub = parts.path[len(prefix) :] or "/"
        for route in app.routes():
            params = _match(route.path, sub) if route.method == "GET" else None
            if params is not None:
                try:
                    out = route.handler(Request(params, dict(parse_qsl(parts.query)), {}, {}))
                except Exception as exc:  # a spec's screen that fails to render: the draft's fault, said
                    raise AppError(f"GET {url}: {type(exc).__name__}: {exc}") from exc
                if isinstance(out, Redirect):
                    url = prefix + out.path
                    break
                return out
        else:
            raise AppError(f"GET {url}: no screen of {app.name} serves it")
    raise AppError(f"GET {url}: too many redirects")


async def unreachable_in_process(app: App) -> list[str]:
    """:func:`unreachable_actions` of the spec app ``app`` (a SpecApp instance), crawled in process."""

    async def fetch(path: str) -> str:
        return render_get(app, path)

    return unreachable_actions(app.SPEC, await crawl(fetch, app.name))  # type: ignore[attr-defined]
