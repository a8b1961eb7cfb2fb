"""Token-level policy losses for GRPO (pure functions with shapes; CPU-testable).

Every function works on padded [N, T] tensors with a float/bool ``mask`` that is 1 on the tokens that carry
loss (the responses new in a packed window) and 0 on prompts, context steps and padding.
"""

from __future__ import annotations

import torch


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


def decoupled_weights(
    prox_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor, cap: float
) -> torch.Tensor:
    """The behaviour importance weights of decoupled PPO (AReaL), truncated: min(pi_prox / pi_behav, cap).

    The clipped ratio compares the current weights with the proximal policy (the trainer's weights before this
    update, ``prox_logprobs``), so the trust region is measured from weights the trainer knows, whatever
    version sampled the tokens; this weight then corrects for the engine's older policy (``behaviour_logprobs``,
    what it sampled with). Truncation at ``cap`` bounds the variance that very stale tokens would bring.

    Shapes: [N, T] each; returns [N, T] without grad (0 where mask is 0).
    """
    w = torch.exp((prox_logprobs - behaviour_logprobs).clamp(max=30.0)).clamp(max=cap)
    return (w * mask.to(w.dtype)).detach()
