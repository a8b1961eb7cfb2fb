"""What a task template makes and how it registers: :class:`Draft`, :func:`template` and the registry
``TEMPLATES``, plus the vocabulary a template writes its verifier checks and row choices in.

The templates themselves live in :mod:`maigym_ray.synth.templates` (single-app ones, by kind of app) and
:mod:`maigym_ray.synth.cross_app`; a module's templates are registered when it is imported.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from maigym_ray.synth.planner import Step
from maigym_ray.synth.world import World


@dataclass(frozen=True)
class Draft:
    """One task before planning and validation."""

    template: str
    instruction: str
    apps: tuple[str, ...]  # the first is where the task starts
    kind: str  # "info" (answered with ``answer``) or "state" (changes app state)
    checks: tuple[dict[str, Any], ...]
    plan: tuple[Step, ...]
    #: overrides for world-independent templates (the debug curriculum): the task id, its own app seeds and
    #: its split. Empty: ``<template>-w<world>-<k>``, the world's seeds, the split by world and app.
    task_id: str = ""
    seeds: dict[str, Any] | None = None
    split: str = ""
    tags: tuple[str, ...] = ()
    max_steps: int = 0  # 0: twice the golden solution's length plus 2, at least 8
    #: a whole verifier spec instead of ``checks`` (e.g. a hand-written, jailed ``code`` verifier).
    verifier: dict[str, Any] | None = None


TemplateFn = Callable[[World, random.Random], list[Draft]]
#: name -> (function, apps it touches)
TEMPLATES: dict[str, tuple[TemplateFn, tuple[str, ...]]] = {}
#: the templates a synthesis run uses when it names none (world-independent ones are left out)
DEFAULT_TEMPLATES: list[str] = []


def template(name: str, apps: tuple[str, ...], default: bool = True) -> Callable[[TemplateFn], TemplateFn]:
    """Registers a template under ``name``; ``apps`` are the apps its tasks touch (first = start app)."""

    def deco(fn: TemplateFn) -> TemplateFn:
        TEMPLATES[name] = (fn, apps)
        if default:
            DEFAULT_TEMPLATES.append(name)
        return fn

    return deco


# -- verifier checks and row choices ------------------------------------------------------------------------------
def exists(app: str, path: str, **match: Any) -> dict[str, Any]:
    """A check: some record of ``app.path`` matches."""
    return {"op": "exists", "app": app, "path": path, "match": match}


def absent(app: str, path: str, **match: Any) -> dict[str, Any]:
    """A check: no record of ``app.path`` matches."""
    return {"op": "absent", "app": app, "path": path, "match": match}


def answer(*any_of: str, numeric: bool = False) -> dict[str, Any]:
    """A check on the agent's answer."""
    return {"op": "answer", "any_of": list(any_of), "numeric": numeric}


def times(text: str) -> list[str]:
    """The HH:MM times in a row, in order."""
    return re.findall(r"\b\d\d:\d\d\b", text)


def price(text: str) -> float:
    """The first euro amount in a row."""
    m = re.search(r"€\s*([\d.]+)", text)
    return float(m.group(1)) if m else float("inf")


def cheapest(rows: list[tuple[str, str]], env: dict[str, str]) -> str:
    """The row with the lowest euro amount."""
    return min(rows, key=lambda r: price(r[1]))[0] if rows else ""
