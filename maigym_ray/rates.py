"""Rates over scored episodes. With no scored episode a rate is "no data" -- ``None`` in JSON, ``n/a`` in tables
-- never 0.0, which would read as "every episode failed" when nothing was scored (e.g. all infra-failed)."""

from __future__ import annotations


def rate(hits: float, scored: int) -> float | None:
    """``hits / scored``, or None when nothing was scored."""
    return hits / scored if scored else None


def fmt_rate(value: float | None, spec: str = ".2f") -> str:
    """A rate for a table or a log line: ``n/a`` for no data."""
    return "n/a" if value is None else format(value, spec)
