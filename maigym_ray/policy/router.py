"""EngineRouter: sends every request of an episode to the same engine, so that engine's prefix cache stays
warm for the episode. ``mode="random"`` spreads requests at random (the baseline the benchmark compares)."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from maigym_ray.harness.model_policy import Generation, SamplingConfig


class EngineRouter:
    """An Engine over N engine actors. Sticky routing is a stable hash of the episode id: stateless, so any
    number of harness workers route an episode's requests to the same engine without coordination."""

    def __init__(self, engines: list[Any], mode: str = "sticky", seed: int = 0) -> None:
        if mode not in ("sticky", "random"):
            raise ValueError(f"router mode {mode!r}: choose sticky or random")
        if not engines:
            raise ValueError("the router needs at least one engine")
        self.engines = list(engines)
        self.mode = mode
        self._rng = random.Random(seed)

    def pick(self, episode_id: str) -> int:
        """The index of the engine that serves ``episode_id``'s next request."""
        if self.mode == "random":
            return self._rng.randrange(len(self.engines))
        digest = hashlib.blake2b(episode_id.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % len(self.engines)

    async def generate(
        self, prompt_ids: list[int], images: list[bytes], sampling: SamplingConfig, episode_id: str
    ) -> Generation:
        engine = self.engines[self.pick(episode_id)]
        return await engine.generate.remote(prompt_ids, images, sampling, episode_id)
