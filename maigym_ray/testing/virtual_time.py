"""VirtualTimeLoop: an asyncio event loop on simulated time.

When nothing is ready to run, the loop does not wait for its next timer: it jumps its clock to it. So coroutines
that ``await asyncio.sleep(...)`` run in simulated seconds, as fast as their events can be processed, and the
asynchronous driver's own scheduler (rl/group_stream.py) runs unchanged at cluster scale
(maigym_ray/testing/rl_sim.py). Nothing may wait on a thread or a socket inside it: with no timer and nothing
ready, the loop would wait forever, so it raises instead.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any


class _JumpSelector(selectors.SelectSelector):
    """A selector whose ``select`` advances the loop's clock by the timeout instead of sleeping."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:
            raise RuntimeError("the simulation waits on nothing: no timer is scheduled and nothing is ready")
        self._clock[0] += max(0.0, timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """``loop.time()`` is the simulated time in seconds (0 at creation)."""

    def __init__(self) -> None:
        self._now = [0.0]
        super().__init__(selector=_JumpSelector(self._now))

    def time(self) -> float:
        return self._now[0]


def run_virtual(main: Coroutine[Any, Any, Any]) -> Any:
    """Runs ``main`` to its end on a fresh VirtualTimeLoop and returns its result."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()
