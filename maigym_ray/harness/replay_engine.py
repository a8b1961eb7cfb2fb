"""ReplayEngine: an Engine whose replies come from a script of text instead of a model.

The demonstration policy replays golden solutions through it, so SFT demos carry the same prompt ids and
response framing as sampled episodes. It encodes each scripted reply with the real tokenizer and reports how many
prompt tokens a perfect per-episode prefix cache would have served. (The Ray-actor stand-in with failures on demand is ``maigym_ray.testing.ScriptedEngine``.)
"""

from __future__ import annotations

from collections.abc import Callable

from maigym_ray.generation import Generation, SamplingConfig
from maigym_ray.harness.history import reusable_prefix


class ReplayEngine:
    """Replies ``script(episode_id, step)``, encoded with ``encode`` and followed by ``end_ids``."""

    def __init__(
        self,
        script: Callable[[str, int], str],
        encode: Callable[[str], list[int]],
        end_ids: tuple[int, ...] = (),
    ) -> None:
        self.script = script
        self.encode = encode
        self.end_ids = end_ids
        self._seen: dict[str, list[list[int]]] = {}

    async def generate(
        self, prompt_ids: list[int], images: list[bytes], sampling: SamplingConfig, episode_id: str
    ) -> Generation:
        earlier = self._seen.setdefault(episode_id, [])
        ids = tuple(self.encode(self.script(episode_id, len(earlier))) + list(self.end_ids))
        cached = reusable_prefix(prompt_ids, earlier)
        earlier.append(list(prompt_ids) + list(ids))
        return Generation(ids, tuple(0.0 for _ in ids), cached)
