"""Token-level policy losses for GRPO (pure functions with shapes; CPU-testable).

Every function works on padded [N, T] tensors with a float/bool ``mask`` that is 1 on the tokens that carry
loss (the responses new in a packed window) and 0 on prompts, context steps and padding.
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm")


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO/GRPO clipped surrogate per token, with asymmetric clipping (clip-higher).

    Args:
        logprobs: [N, T] log pi_theta of the sampled tokens.
        old_logprobs: [N, T] log pi_old of the same tokens (the engine's sampled logprobs, or recomputed).
        advantages: [N] per-sequence or [N, T] per-token advantages.
        mask: [N, T] 1 where the token carries loss.
        eps_low, eps_high: the ratio is clipped to [1 - eps_low, 1 + eps_high].
    Returns:
        (loss [N, T] (0 where mask is 0), clipped [N, T] bool: tokens where the clipped branch was taken).
    """
    adv = advantages.unsqueeze(1).expand_as(logprobs) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * adv
    clipped_ratio = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    clipped = clipped_ratio * adv
    m = mask.to(logprobs.dtype)
    loss = -torch.minimum(unclipped, clipped) * m
    took_clip = (clipped < unclipped) & (m > 0)
    return loss, took_clip


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The k3 estimator of KL(pi_theta || pi_ref) per token: exp(r) - r - 1 with r = ref - logprob.

    Shapes: [N, T] each; returns [N, T] (0 where mask is 0). Non-negative, unbiased, low variance.
    """
    r = ref_logprobs - logprobs
    return (torch.exp(r) - r - 1.0) * mask.to(logprobs.dtype)


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, mode: str = "token_mean", norm: float = 1.0
) -> torch.Tensor:
    """Reduces a [N, T] per-token loss to a scalar.

    Modes:
        token_mean: sum over all loss tokens / number of loss tokens (every token weighs the same; DAPO).
        seq_mean_token_mean: mean over tokens within each sequence, then over sequences (original GRPO).
        seq_mean_token_sum: sum over tokens within each sequence, mean over sequences.
        seq_mean_token_sum_norm: like seq_mean_token_sum divided by a constant ``norm`` (e.g. the max response
            length), the length-unbiased Dr.GRPO form.
    Sequences with no loss token are ignored by the per-sequence modes.
    """
    m = mask.to(per_token.dtype)
    if mode == "token_mean":
        return (per_token * m).sum() / m.sum().clamp(min=1.0)
    tokens = m.sum(dim=1)
    live = tokens > 0
    if not bool(live.any()):
        return per_token.sum() * 0.0
    seq_sum = (per_token * m).sum(dim=1)[live]
    if mode == "seq_mean_token_mean":
        return (seq_sum / tokens[live]).mean()
    if mode == "seq_mean_token_sum":
        return seq_sum.mean()
    if mode == "seq_mean_token_sum_norm":
        return seq_sum.mean() / norm
    raise ValueError(f"aggregation {mode!r}: choose one of {', '.join(AGGREGATIONS)}")
