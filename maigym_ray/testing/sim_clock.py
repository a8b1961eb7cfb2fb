"""SimClock: a discrete-event clock. Simulated seconds pass only from one scheduled event to the next, so a
20,000-instance run of many simulated minutes takes as long as its events take to process."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any


class SimClock:
    """``clock()`` is the simulated time in seconds (pass the clock itself wherever a ``time.monotonic`` goes);
    ``at``/``later`` schedule a callback; ``run`` processes events in time order (FIFO among equal times)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.events = 0
        self._queue: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def __call__(self) -> float:
        return self.now

    def at(self, t: float, fn: Callable[..., Any], *args: Any) -> None:
        """Runs ``fn(*args)`` at simulated time ``t`` (now, if ``t`` is past)."""
        heapq.heappush(self._queue, (max(t, self.now), next(self._seq), fn, args))

    def later(self, dt: float, fn: Callable[..., Any], *args: Any) -> None:
        """Runs ``fn(*args)`` ``dt`` simulated seconds from now."""
        self.at(self.now + dt, fn, *args)

    def run(self, until: float = math.inf, stop: Callable[[], bool] | None = None) -> None:
        """Processes events up to simulated time ``until`` (the clock then reads ``until`` if it was finite),
        or until ``stop()`` is true after an event."""
        q = self._queue
        while q and q[0][0] <= until:
            t, _, fn, args = heapq.heappop(q)
            self.now = t
            self.events += 1
            fn(*args)
            if stop is not None and stop():
                return
        if until != math.inf:
            self.now = max(self.now, until)

    def pending(self) -> int:
        """Events scheduled and not yet run."""
        return len(self._queue)
