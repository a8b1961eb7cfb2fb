"""BusyClock: how long an engine had work, for the idle shares the asynchronous-RL benchmark reports."""

from __future__ import annotations

import time


class BusyClock:
    """Wall seconds during which at least one request was in flight."""

    def __init__(self) -> None:
        self._in_flight = 0
        self._since = 0.0
        self._total = 0.0

    def enter(self) -> None:
        """A request starts."""
        if self._in_flight == 0:
            self._since = time.perf_counter()
        self._in_flight += 1

    def leave(self) -> None:
        """A request ends."""
        self._in_flight -= 1
        if self._in_flight == 0:
            self._total += time.perf_counter() - self._since

    def seconds(self) -> float:
        """The busy seconds so far, the current stretch included."""
        return self._total + (time.perf_counter() - self._since if self._in_flight else 0.0)
