"""ScriptedEngine: a stand-in for the vLLM engine actor with the same calls, and failures on demand.

``generate(prompt_ids, images, sampling, episode_id)`` returns the next scripted reply (token ids) with a
logprob per token, like :class:`maigym_ray.policy.engine.EngineActor`. Run it as a Ray actor exactly like the
real one (``ray.remote(ScriptedEngine).remote(...)``). Failures:

- ``die_after=n`` / ``hang_after=n``: the (n+1)-th ``generate`` ends the process / never returns;
- a file ``<faults_dir>/generate.die`` or ``generate.hang`` is claimed (unlinked) by the first engine whose
  ``generate`` sees it, so a test can break one engine mid-rollout without knowing which one serves what.

``wrong_every=n`` answers every n-th episode it sees (its 0th, n-th, ...) from ``wrong`` instead of ``replies``,
so groups of attempts differ in reward and GRPO has something to train on. ``receive_weights`` takes a new
version the way the engine actor answers it (no bytes move: drills whose trainer is a stand-in).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from maigym_ray.errors import MaigymError
from maigym_ray.generation import Generation, SamplingConfig
from maigym_ray.policy.busy_clock import BusyClock


class ScriptedEngine:
    """Replies from ``replies`` (token-id lists, cycled per episode step) with logprob ``logprob`` per token."""

    def __init__(
        self,
        replies: Sequence[Sequence[int]],
        engine_id: int = 0,
        die_after: int = -1,
        hang_after: int = -1,
        faults_dir: str = "",
        logprob: float = -0.5,
        delay_s: float = 0.0,
        wrong: Sequence[Sequence[int]] = (),
        wrong_every: int = 0,
    ) -> None:
        if not replies:
            raise ValueError("a scripted engine needs at least one reply")
        self.replies = [tuple(r) for r in replies]
        self.engine_id = engine_id
        self.die_after = die_after
        self.hang_after = hang_after
        self.faults_dir = faults_dir
        self.logprob = logprob
        self.delay_s = delay_s
        self.wrong = [tuple(r) for r in wrong]
        self.wrong_every = wrong_every
        self._episodes: dict[str, int] = {}  # each episode's ordinal, in the order this engine first saw them
        self.version = 0
        self.calls = 0
        self.queries = 0
        self._steps: dict[str, int] = {}
        self.asleep = False
        self._busy = BusyClock()

    async def start(self) -> dict[str, Any]:
        """Like the engine actor's start: nothing to load."""
        return {"model": "scripted", "start_s": 0.0}

    def _claim(self, kind: str) -> bool:
        if not self.faults_dir:
            return False
        try:
            os.unlink(Path(self.faults_dir) / f"generate.{kind}")
            return True
        except FileNotFoundError:
            return False

    async def generate(
        self, prompt_ids: list[int], images: list[bytes], sampling: SamplingConfig, episode_id: str
    ) -> Generation:
        """The episode's next scripted reply."""
        if self.asleep:
            raise MaigymError(f"engine {self.engine_id}: generate while asleep (the trainer holds the GPU)")
        n = self.calls
        self.calls += 1
        if n == self.die_after or self._claim("die"):
            os._exit(17)  # what a crashed engine process looks like to its callers
        if n == self.hang_after or self._claim("hang"):
            await asyncio.sleep(3600)
        if self.delay_s:
            self._busy.enter()
            try:
                await asyncio.sleep(self.delay_s)
            finally:
                self._busy.leave()
        step = self._steps.get(episode_id, 0)
        self._steps[episode_id] = step + 1
        self.queries += len(prompt_ids)
        ordinal = self._episodes.setdefault(episode_id, len(self._episodes))
        script = self.wrong if self.wrong_every and ordinal % self.wrong_every == 0 else self.replies
        reply = script[step % len(script)][: sampling.max_tokens]
        return Generation(reply, (self.logprob,) * len(reply), 0, self.version)

    async def join_weight_group(
        self, world_size: int, rank: int, group_name: str, backend: str = "gloo"
    ) -> dict[str, Any]:
        """Like the engine actor's: here no collective is formed (the trainer beside it sends nothing)."""
        return {"rank": rank, "world_size": world_size, "group": group_name}

    async def receive_weights(
        self, buckets: list[dict[str, Any]], version: int, group_name: str
    ) -> dict[str, float]:
        """Takes the new version at once, and answers as the engine actor does: the version and the tensors."""
        self.version = version
        return {"tensors": float(sum(len(b["names"]) for b in buckets)), "version": float(version)}

    async def busy_seconds(self) -> float:
        """Seconds with a (delayed) reply in flight, like the engine actor's."""
        return self._busy.seconds()

    async def prefix_cache_stats(self) -> dict[str, float]:
        """No cache: zero hits."""
        return {"hits": 0.0, "queries": float(self.queries)}

    async def reset_prefix_cache(self) -> None:
        """Nothing cached."""

    async def shutdown(self) -> None:
        """Nothing to stop."""

    async def sleep(self, level: int = 1) -> dict[str, Any]:
        """Like the engine actor's colocated-mode sleep on CPU: refuses ``generate`` until ``wake_up``."""
        self.asleep = True
        return {"asleep": True, "released": False, "level": level}

    async def wake_up(self) -> dict[str, Any]:
        """Ends a ``sleep``."""
        self.asleep = False
        return {"asleep": False, "released": False}
