"""Tally: a counter with plus and minus buttons. Its state is ``{"counter": {"value": n}}``."""

from __future__ import annotations

import html
from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route


class TallyApp(App):
    """A counter; a task seeds its start value and a verifier reads ``counter.value``."""

    name: ClassVar[str] = "tally"
    title: ClassVar[str] = "Tally"
    SCHEMA: ClassVar[dict[str, type]] = {"counter": dict}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {"counter": {"value": 0}}

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.show),
            Route("POST", "/plus", lambda req: self.add(1)),
            Route("POST", "/minus", lambda req: self.add(-1)),
        ]

    def show(self, req: Request) -> str:
        # Plain HTML with stable element ids (data-mg-id) is all an app needs; the built-in apps use Jinja2.
        value = html.escape(str(self.data["counter"]["value"]))
        return (
            "<!doctype html><html><head><title>Tally</title></head><body><h1>Tally</h1>"
            f'<p data-mg-id="value">Value: {value}</p>'
            '<form method="post" action="/tally/plus"><button type="submit" data-mg-id="plus">Plus one</button></form>'
            '<form method="post" action="/tally/minus"><button type="submit" data-mg-id="minus">Minus one</button>'
            "</form></body></html>"
        )

    def add(self, step: int) -> Redirect:
        self.data["counter"]["value"] += step
        return Redirect("/")
