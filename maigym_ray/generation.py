"""The generation contract between a policy and an engine: the sampling settings sent, the ``Generation`` returned,
and the ``Engine`` protocol that the vLLM engine actor, the OpenAI-compatible client, the router and the scripted
fakes all implement. It sits beside ``types`` so both the harness (which asks) and the policy layer (which
answers) depend on it, not on each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class SamplingConfig:
    """Sampling settings passed to the engine."""

    #: 0 = greedy.
    temperature: float = 1.0
    top_p: float = 1.0
    #: the longest reply, in tokens.
    max_tokens: int = 64
    #: per-request seed; None = unseeded. On vLLM CPU it is ignored (the engine seed applies): per-request
    #: seeds crash vLLM's CPU sampler in batches.
    seed: int | None = None
    #: a regular expression every reply must match ("" = free text). The vLLM engine enforces it with its
    #: structured outputs; the harness sets it per step from the action space (harness/action_space.py).
    regex: str = ""


@dataclass(frozen=True)
class Generation:
    """What an engine returns for one prompt."""

    response_ids: tuple[int, ...]
    logprobs: tuple[float, ...] = ()
    num_cached_tokens: int = 0
    policy_version: int = 0


class Engine(Protocol):
    """A generation engine: prompt ids (+ images) in, sampled ids and their logprobs out."""

    async def generate(
        self, prompt_ids: list[int], images: list[bytes], sampling: SamplingConfig, episode_id: str
    ) -> Generation: ...
