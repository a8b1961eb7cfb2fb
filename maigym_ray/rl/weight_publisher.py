"""WeightPublisher: how the trainer's weights reach the engines, with the check that they landed.

Trainer rank 0 is rank 0 of a weight group (maigym_ray/weights/group.py) that every engine joins; a publish
broadcasts the weights bucket by bucket and each engine loads them in place, drops its prefix cache and
takes the new version. The publisher then checks every engine's answer: an engine that kept old weights, or
loaded fewer tensors than the layout holds, would sample off-policy unnoticed, so it is an InfraError.

The engines go on serving while they receive (they are async actors, and vLLM loads between engine steps):
the asynchronous driver publishes without draining its rollout pool. A request in flight then finishes on the
new weights, and its turn keeps the version it started on (policy/engine.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from maigym_ray.errors import InfraError


class WeightPublisher:
    """A trainer's weights (a TrainerGroup, given to each call) to ``engines`` (engine actor handles) over
    ``backend`` (gloo or nccl), in buckets of ``bucket_mb``."""

    def __init__(self, engines: list[Any], backend: str, bucket_mb: int) -> None:
        self.engines, self.backend, self.bucket_mb = engines, backend, bucket_mb
        self.group = f"weights-{uuid.uuid4().hex[:8]}"
        #: the trainer's bucket layout (names, sizes, dtypes of each bucket), read at ``join``.
        self.layout: list[dict[str, Any]] = []

    async def join(self, trainer: Any) -> None:
        """Reads the layout and forms the weight group: the trainer as rank 0, engine i as rank i + 1."""
        self.layout = await asyncio.to_thread(trainer.layout, self.bucket_mb << 20)
        world = len(self.engines) + 1
        joins = [
            e.join_weight_group.remote(world, i + 1, self.group, self.backend)
            for i, e in enumerate(self.engines)
        ]
        await asyncio.gather(trainer.join_weight_group(world, self.group, self.backend), *joins)

    async def publish(self, trainer: Any, version: int) -> float:
        """Sends the trainer's weights to every engine as ``version`` and checks that each loaded them all;
        returns seconds."""
        t0 = time.perf_counter()
        refs = [e.receive_weights.remote(self.layout, version, self.group) for e in self.engines]
        await trainer.send_weights(self.layout, self.group)
        got = await asyncio.gather(*refs, return_exceptions=True)
        gone = [
            (i, f"{type(g).__name__}: {g}"[:200]) for i, g in enumerate(got) if isinstance(g, BaseException)
        ]
        if (
            gone
        ):  # an engine that died (or failed to load) holds no weights at all: the run cannot go on as is
            raise InfraError(f"weight sync to version {version} failed on (engine, error) = {gone}")
        tensors = sum(len(b["names"]) for b in self.layout)
        stale = [
            (i, int(g["version"]), int(g["tensors"]))
            for i, g in enumerate(got)
            if int(g["version"]) != version or int(g["tensors"]) != tensors
        ]
        if stale:
            raise InfraError(
                f"weight sync to version {version} ({tensors} tensors) did not land: "
                f"(engine, version, tensors) = {stale}"
            )
        return time.perf_counter() - t0
