"""The staleness rule of asynchronous GRPO (pure functions; CPU-testable).

A group's version is the policy version that generated the FIRST turn of its OLDEST member: the engine records
on every turn the weights a request started on (policy/engine.py), so a member whose later turns ran on newer
weights still counts from its first. The group trains as a whole or not at all (its advantages compare its
members with each other), so a group whose members straddle versions is as stale as its oldest member.

Two checks keep every trained group within ``max_staleness`` (k) versions of the trainer:

- admission (as AReaL does): the rollout pool starts group number ``n`` (0-based, counted from the start of
  RL) only once ``u`` updates are published with ``n < (u + k + 1) * groups_per_update``. Groups are consumed
  ``groups_per_update`` at a time in about the order they started, so a group started after update ``u`` is
  consumed by an update at most ``k`` later. (It counts updates rather than versions: a round with nothing to
  train on publishes no weights, and must still let the next round's groups start.)
- consumption: groups finish out of order, so the trainer checks each group it takes. One past the bound is
  not trained on: it is stored (``rl/stale-RRRR``), counted in the round's metrics, and the pool starts one
  more group in its place. No episode is dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from maigym_ray.types import Trajectory


def group_version(trajs: Sequence[Trajectory], default: int) -> int:
    """The version of a group: the oldest first-turn ``policy_version`` of its members that have a model turn
    (``default``, the version the group started under, for a group without one)."""
    firsts = [t.turns[0].policy_version for t in trajs if t.turns]
    return min(firsts) if firsts else default


def staleness(trainer_version: int, version: int) -> int:
    """How many updates the trainer's weights (``trainer_version``) are ahead of data made at ``version``."""
    return max(0, trainer_version - version)


def may_start(started: int, updates: int, max_staleness: int, per_update: int) -> bool:
    """Whether the pool may start group number ``started`` (0-based since it opened) once ``updates`` policy
    updates have been published since; see the module docstring."""
    return started < (updates + max_staleness + 1) * per_update


def clip_by_staleness(
    clipped: torch.Tensor, mask: torch.Tensor, stale: torch.Tensor
) -> dict[int, tuple[float, float]]:
    """Clipped and trained tokens per staleness.

    Args:
        clipped: [N, T] bool, the tokens whose clipped branch was taken (losses.clipped_policy_loss).
        mask: [N, T] loss mask (> 0 where a token trains).
        stale: [N] int, each sequence's staleness.
    Returns:
        {staleness: (clipped tokens, trained tokens)} for every staleness present in ``stale``.
    """
    out: dict[int, tuple[float, float]] = {}
    trained = (mask > 0).sum(dim=1)
    hits = (clipped & (mask > 0)).sum(dim=1)
    for s in sorted({int(v) for v in stale.tolist()}):
        rows = stale == s
        out[s] = (float(hits[rows].sum()), float(trained[rows].sum()))
    return out
