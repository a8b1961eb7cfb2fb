"""GRPO group advantages and zero-variance filtering (pure functions, CPU-testable).

A GRPO group is G attempts of one task from the same initial state. Each attempt's advantage is its reward
minus the group mean, divided by the group std (plus eps); Dr.GRPO drops the std division, which removes the
bias towards groups whose rewards barely differ. A group whose rewards are all equal has zero advantage for
every attempt and carries no policy gradient, so it is dropped before packing (and counted: the share of
attempts in such groups is what the adaptive sampler drives down), unless ``format_advantages`` gives its
attempts a term of their own (they differ in malformed steps).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6, normalize_std: bool = True) -> torch.Tensor:
    """Advantages of each attempt within its group.

    Args:
        rewards: [B, G] rewards of B groups of G attempts.
        eps: added to the std so a near-constant group does not explode.
        normalize_std: divide by the group std (GRPO); False gives mean-only Dr.GRPO advantages.
    Returns:
        [B, G] advantages; rows of a zero-variance group are exactly 0.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [B, G], got shape {tuple(rewards.shape)}")
    centered = rewards - rewards.mean(dim=1, keepdim=True)
    if not normalize_std:
        return centered
    std = rewards.std(dim=1, unbiased=False, keepdim=True)
    return centered / (std + eps)


def step_penalized(
    rewards: torch.Tensor, steps: torch.Tensor, success: torch.Tensor, penalty: float
) -> torch.Tensor:
    """Rewards with ``penalty`` per step taken off the successful attempts only.

    Among attempts that all succeed, the shorter one then scores higher, so GRPO prefers the short solution.
    Failures keep their reward: a penalty on them would rank a failure that quits at once above one that tries,
    and with std-normalised advantages even a one-step difference between failures becomes a full-size signal.

    Args:
        rewards: [B, G] verifier rewards.
        steps: [B, G] steps each attempt took.
        success: [B, G] bool, the verifier's verdicts.
        penalty: taken off a success per step (>= 0; 0 returns ``rewards`` unchanged).
    Returns:
        [B, G] rewards.
    """
    if penalty < 0:
        raise ValueError(f"step penalty must be >= 0, got {penalty}")
    if rewards.shape != steps.shape or rewards.shape != success.shape:
        raise ValueError(
            f"rewards, steps and success must share a shape, got {tuple(rewards.shape)}, "
            f"{tuple(steps.shape)} and {tuple(success.shape)}"
        )
    return rewards - penalty * steps.to(rewards.dtype) * success.to(rewards.dtype)


def format_advantages(invalid: torch.Tensor, penalty: float) -> torch.Tensor:
    """A small advantage term against malformed actions: ``penalty`` per unparsable step, centred in the group.

    It is added to the verifier's advantages, not to the reward, so the group's std normalisation never scales
    it up: in a group whose attempts all fail, a difference of one malformed step stays a ``penalty``-sized
    nudge instead of a full-size signal, and in a group with successes the verifier's term dominates it.
    Attempts with equally many malformed steps get 0, so it never ranks a quick failure above a long one.

    Args:
        invalid: [B, G] steps of each attempt whose action did not parse.
        penalty: advantage per malformed step (>= 0; 0 gives zeros).
    Returns:
        [B, G] advantages with a zero mean in each group.
    """
    if penalty < 0:
        raise ValueError(f"invalid-action penalty must be >= 0, got {penalty}")
    if invalid.dim() != 2:
        raise ValueError(f"invalid must be [B, G], got shape {tuple(invalid.shape)}")
    counts = invalid.to(torch.float32)
    return -penalty * (counts - counts.mean(dim=1, keepdim=True))


def zero_variance_groups(rewards: torch.Tensor, tol: float = 1e-8) -> torch.Tensor:
    """[B] bool: groups whose G rewards are all equal (within ``tol``). Input [B, G]."""
    return (rewards.max(dim=1).values - rewards.min(dim=1).values) <= tol


def zero_variance_share(groups: Sequence[torch.Tensor]) -> float:
    """The share of attempts that sit in a group carrying no GRPO gradient (0.0 when there are none).

    Each of ``groups`` is one group's [G] rewards; G may differ between groups (infra-failed attempts are
    left out before this), so the share counts attempts, not groups. A lone attempt has nothing to be
    compared with and counts as flat."""
    total = sum(int(g.numel()) for g in groups)
    flat = sum(int(g.numel()) for g in groups if g.numel() and bool(zero_variance_groups(g[None])[0]))
    return flat / max(1, total)
