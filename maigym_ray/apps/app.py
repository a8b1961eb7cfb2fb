"""The mocked-app framework: an :class:`App` owns one app's state, its screens and its seed schema.

An app is a plain Python object. Its state is JSON (dicts and lists), seeded from data, snapshotted on
``seed`` and restored on ``reset``; ``state()`` is what verifiers read. Screens are functions of the state
rendered with Jinja2 templates that carry accessible markup and stable element ids (``data-mg-id``), so the
same golden solution replays identically. The :class:`~maigym_ray.apps.host.AppHost` serves apps over HTTP.
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import jinja2

from maigym_ray.errors import AppError

_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class Redirect:
    """A handler result that sends the browser to another screen of the app (post/redirect/get)."""

    path: str


@dataclass(frozen=True)
class Request:
    """What a screen handler sees: path parameters, query string and form fields (all strings)."""

    params: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    form: dict[str, str] = field(default_factory=dict)
    form_lists: dict[str, list[str]] = field(default_factory=dict)


Handler = Callable[[Request], "str | Redirect"]


@dataclass(frozen=True)
class Route:
    """One screen or form action: HTTP method, path pattern relative to the app root, and its handler."""

    method: str
    path: str
    handler: Handler


class App(ABC):
    """Base class of every mocked app. Subclasses declare ``name``, ``title``, ``SCHEMA`` and their routes.

    ``SCHEMA`` maps each top-level state key to its JSON type (``list`` or ``dict`` or a scalar type); seeds are
    checked against it so a malformed seed is an :class:`AppError` naming the key, not a broken screen later.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    icon: ClassVar[str] = "●"
    SCHEMA: ClassVar[dict[str, type]]

    def __init__(self) -> None:
        self._initial: dict[str, Any] = {}
        self.data: dict[str, Any] = {}
        self.seed(self.default_seed())

    # -- state -----------------------------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def default_seed(cls) -> dict[str, Any]:
        """The state a task gets when it does not seed this app."""

    def seed(self, data: dict[str, Any]) -> None:
        """Replaces the state with ``data`` (validated) and makes it the snapshot that ``reset`` restores."""
        self._initial = self.validated(data)
        self.reset()

    def validated(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` merged over the default seed, checked against SCHEMA, as a JSON-clean deep copy."""
        if not isinstance(data, dict):
            raise AppError(f"{self.name}: seed must be an object, got {type(data).__name__}")
        merged = {**self.default_seed(), **data}
        for key, value in merged.items():
            want = self.SCHEMA.get(key)
            if want is None:
                raise AppError(f"{self.name}: unknown seed key {key!r}; valid: {', '.join(self.SCHEMA)}")
            if want is float and isinstance(value, int) and not isinstance(value, bool):
                continue
            if not isinstance(value, want):
                raise AppError(
                    f"{self.name}: seed key {key!r} must be {want.__name__}, got {type(value).__name__}"
                )
        # json round-trip: snapshot is a deep, JSON-clean copy that handlers can never alias.
        try:
            return json.loads(json.dumps(merged))
        except (TypeError, ValueError) as exc:
            raise AppError(f"{self.name}: seed is not JSON data ({exc})") from exc

    def reset(self) -> None:
        """Restores the state snapshotted by the last ``seed``."""
        self.data = copy.deepcopy(self._initial)

    def state(self) -> dict[str, Any]:
        """The app's state as JSON-able data: what verifiers read."""
        return copy.deepcopy(self.data)

    # -- screens ---------------------------------------------------------------------------------------------
    @abstractmethod
    def routes(self) -> list[Route]:
        """The app's screens and form actions."""

    def render(self, template: str, **ctx: Any) -> str:
        """Renders ``templates/<app>/<template>`` inside the shared layout."""
        return _TEMPLATES.get_template(f"{self.name}/{template}").render(
            app=self, base=f"/{self.name}", **ctx
        )

    def next_id(self, collection: str, prefix: str) -> str:
        """A deterministic new record id: prefix plus one more than the records already in ``collection``."""
        return f"{prefix}{len(self.data[collection]) + 1}"

    @staticmethod
    def find(items: list[dict[str, Any]], key: str, value: Any) -> dict[str, Any] | None:
        """The first record of ``items`` whose ``key`` equals ``value``."""
        return next((it for it in items if it.get(key) == value), None)
