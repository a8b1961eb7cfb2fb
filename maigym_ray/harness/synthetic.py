"""Synthetic trajectories for benchmarks and tests: random token ids, prompts built by the real history code.

The prompt ids come from :func:`~maigym_ray.harness.history.prompt_ids`, exactly as the harness assembles
them token-in / token-out, so packing and training see the same prefix structure as on a real rollout. The
same seed gives the same header, observations and replies for every history config, so window-wise and
step-wise runs can be compared on identical episodes.
"""

from __future__ import annotations

import random

from maigym_ray.harness.config import HistoryConfig
from maigym_ray.harness.history import prompt_ids
from maigym_ray.types import Reward, Trajectory, Turn


def synthetic_trajectories(
    cfg: HistoryConfig,
    episodes: int,
    steps: int,
    header: int,
    obs: tuple[int, int],
    response: int,
    vocab: int,
    seed: int = 0,
) -> list[Trajectory]:
    """``episodes`` trajectories of ``steps`` turns: a ``header``-token system turn, observations of
    ``obs[0]..obs[1]`` tokens, ``response``-token replies, ids in ``[10, vocab)``; odd episodes succeed."""
    rng = random.Random(seed)
    out = []
    for e in range(episodes):

        def tok(n: int) -> list[int]:
            return [rng.randrange(10, vocab) for _ in range(n)]

        head = tok(header)
        seen = [tok(rng.randint(*obs)) for _ in range(steps)]
        replies = [tok(response) for _ in range(steps)]
        turns = tuple(
            Turn(
                t,
                "wait()",
                None,
                prompt_ids=tuple(prompt_ids(head, seen, replies, t, cfg)),
                response_ids=tuple(replies[t]),
                logprobs=tuple(-7.0 for _ in replies[t]),
            )
            for t in range(steps)
        )
        out.append(Trajectory(f"ep{e}", "task", "web", turns, Reward(float(e % 2), bool(e % 2))))
    return out
