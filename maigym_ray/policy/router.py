"""EngineRouter: sends every request of an episode to the same engine, so that engine's prefix cache stays
warm for the episode. ``mode="random"`` spreads requests at random (the baseline the benchmark compares).

A dead engine (its actor is gone, or vLLM reports its engine dead) or a hung one (``generate`` past
``timeout_s``) is an infrastructure failure, not the episode's: the router stops using that engine and sends
the request to a live one. Only when no engine is left does the episode end as infra-failed.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Any

from ray.exceptions import RayActorError

from maigym_ray.errors import InfraError
from maigym_ray.generation import Generation, SamplingConfig


class EngineRouter:
    """An Engine over N engine actors. Sticky routing is a stable hash of the episode id over the live engines:
    stateless, so any number of harness workers route an episode's requests to the same engine without
    coordination."""

    def __init__(
        self, engines: list[Any], mode: str = "sticky", seed: int = 0, timeout_s: float = 120.0
    ) -> None:
        if mode not in ("sticky", "random"):
            raise ValueError(f"router mode {mode!r}: choose sticky or random")
        if not engines:
            raise ValueError("the router needs at least one engine")
        if timeout_s <= 0:
            raise ValueError(f"router timeout_s must be > 0, got {timeout_s}")
        self.engines = list(engines)
        self.mode = mode
        self.timeout_s = timeout_s
        self.failed: set[int] = set()  # engines seen dead or hung by this router
        self._rng = random.Random(seed)

    def live(self) -> list[int]:
        """Indices of the engines not seen failing."""
        return [i for i in range(len(self.engines)) if i not in self.failed]

    def pick(self, episode_id: str) -> int:
        """The index of the (live) engine that serves ``episode_id``'s next request."""
        live = self.live()
        if not live:
            raise InfraError(f"no live engine: all {len(self.engines)} died or hung")
        if self.mode == "random":
            return live[self._rng.randrange(len(live))]
        digest = hashlib.blake2b(episode_id.encode(), digest_size=8).digest()
        return live[int.from_bytes(digest, "big") % len(live)]

    async def generate(
        self, prompt_ids: list[int], images: list[bytes], sampling: SamplingConfig, episode_id: str
    ) -> Generation:
        """Generates on the episode's engine; on a dead or hung engine, retries on the next live one."""
        while True:
            i = self.pick(episode_id)  # raises InfraError once every engine failed
            try:
                return await asyncio.wait_for(
                    self.engines[i].generate.remote(prompt_ids, images, sampling, episode_id), self.timeout_s
                )
            except (RayActorError, InfraError, TimeoutError):
                # RayActorError: the actor process is gone; InfraError: vLLM's engine died inside it;
                # TimeoutError: it hangs (wait_for cancels our wait; the actor call itself is abandoned).
                self.failed.add(i)
