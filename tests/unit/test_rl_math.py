"""GRPO math against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from maigym_ray.rl.advantages import (
    format_advantages,
    group_advantages,
    step_penalized,
    zero_variance_groups,
    zero_variance_share,
)
from maigym_ray.rl.losses import clipped_policy_loss, k3_kl
from maigym_ray.rl.trainer import TrainerConfig, _aggregate

pytestmark = [pytest.mark.unit, pytest.mark.numeric]


def test_group_advantages_grpo_and_dr_grpo():
    r = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [3.0, 0.0, 0.0, 1.0]])
    adv = group_advantages(r)
    assert torch.allclose(adv[0], torch.tensor([1.0, -1.0, 1.0, -1.0]), atol=1e-5)
    assert torch.equal(adv[1], torch.zeros(4))  # zero-variance group: no signal at all
    std = math.sqrt(((3 - 1) ** 2 + 1 + 1 + 0) / 4)  # population std of [3, 0, 0, 1] around mean 1
    assert torch.allclose(adv[2], torch.tensor([2.0, -1.0, -1.0, 0.0]) / std, atol=1e-5)
    dr = group_advantages(r, normalize_std=False)
    assert torch.allclose(dr[0], torch.tensor([0.5, -0.5, 0.5, -0.5]))
    assert torch.allclose(dr[2], torch.tensor([2.0, -1.0, -1.0, 0.0]))
    with pytest.raises(ValueError):
        group_advantages(torch.zeros(4))


def test_step_penalty_ranks_successes_by_length_and_leaves_failures_alone():
    rewards = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    steps = torch.tensor([[3, 5, 1, 5]])
    success = rewards > 0
    shaped = step_penalized(rewards, steps, success, 0.02)
    assert torch.allclose(shaped, torch.tensor([[0.94, 0.90, 0.0, 0.0]]))
    assert torch.equal(step_penalized(rewards, steps, success, 0.0), rewards)
    # two successes of different length now carry a gradient; two failures of different length still do not
    both_won = step_penalized(
        torch.ones(1, 2), torch.tensor([[3, 5]]), torch.ones(1, 2, dtype=torch.bool), 0.02
    )
    assert group_advantages(both_won)[0, 0] > 0 > group_advantages(both_won)[0, 1]
    both_lost = step_penalized(
        torch.zeros(1, 2), torch.tensor([[1, 5]]), torch.zeros(1, 2, dtype=torch.bool), 0.02
    )
    assert zero_variance_groups(both_lost).tolist() == [True]
    with pytest.raises(ValueError):
        step_penalized(rewards, steps, success, -0.1)
    with pytest.raises(ValueError):
        step_penalized(rewards, steps[:, :2], success, 0.02)


def test_format_advantages_by_hand():
    invalid = torch.tensor([[3, 0, 2, 0], [1, 1, 1, 1]])
    adv = format_advantages(invalid, 0.1)
    assert adv.shape == (2, 4)
    assert torch.allclose(adv[0], torch.tensor([-0.175, 0.125, -0.075, 0.125]))
    assert torch.equal(adv[1], torch.zeros(4))  # equally many malformed steps: no signal
    assert torch.equal(format_advantages(invalid, 0.0), torch.zeros(2, 4))
    with pytest.raises(ValueError):
        format_advantages(invalid, -0.1)
    with pytest.raises(ValueError):
        format_advantages(invalid[0], 0.1)


def test_zero_variance_filtering():
    r = torch.tensor([[1.0, 1.0], [0.0, 0.0], [0.0, 1.0]])
    assert zero_variance_groups(r).tolist() == [True, True, False]
    assert zero_variance_share(list(r)) == pytest.approx(2 / 3)
    # groups of different sizes (infra failures left out): the share counts attempts; a lone attempt is flat
    uneven = [torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.0, 1.0]), torch.tensor([0.5])]
    assert zero_variance_share(uneven) == pytest.approx(4 / 6)
    assert zero_variance_share([torch.tensor([0.0, 1e-9])]) == 1.0  # equal within the tolerance
    assert zero_variance_share([]) == 0.0


def test_clipped_loss_four_cases_by_hand():
    # ratio 1.5 or 0.5 (logprob - old = log ratio), advantages +1 / -1
    logp = torch.tensor([[math.log(1.5), math.log(1.5), math.log(0.5), math.log(0.5)]])
    old = torch.zeros(1, 4)
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    loss, clipped = clipped_policy_loss(logp, old, adv, torch.ones(1, 4), eps_low=0.2, eps_high=0.28)
    # +A, r=1.5: min(1.5, 1.28) = 1.28 (clipped) | -A, r=1.5: min(-1.5, -1.28) = -1.5
    # +A, r=0.5: min(0.5, 0.8) = 0.5 | -A, r=0.5: min(-0.5, -0.8) = -0.8 (clipped)
    assert torch.allclose(loss, torch.tensor([[-1.28, 1.5, -0.5, 0.8]]), atol=1e-6)
    assert clipped.tolist() == [[True, False, False, True]]


def test_clipped_loss_mask_per_sequence_advantage_and_gradient():
    logp = torch.zeros(2, 3, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    loss, _ = clipped_policy_loss(logp, torch.zeros(2, 3), torch.tensor([2.0, -1.0]), mask)
    assert torch.allclose(loss.detach(), torch.tensor([[-2.0, -2.0, 0.0], [0.0, 1.0, 1.0]]))
    _aggregate(loss, {"loss_mask": mask}, TrainerConfig(aggregation="token_mean"), 4.0, 2.0).backward()
    # d(-ratio*A)/dlogp = -A at ratio 1; token_mean divides by the 4 loss tokens; masked tokens get nothing
    assert torch.allclose(logp.grad, torch.tensor([[-0.5, -0.5, 0.0], [0.0, 0.25, 0.25]]))


def test_k3_kl_by_hand():
    logp = torch.tensor([[0.0, math.log(0.5), -1.0]])
    ref = torch.tensor([[math.log(0.5), math.log(0.5), -1.0]])
    kl = k3_kl(logp, ref, torch.tensor([[1.0, 1.0, 0.0]]))
    assert kl[0, 0].item() == pytest.approx(0.5 + math.log(2) - 1)  # r = -log 2
    assert kl[0, 1].item() == 0.0 and kl[0, 2].item() == 0.0 and bool((kl >= 0).all())


def test_the_trainers_aggregation_by_hand():
    """The trainer's reduction (what runs): normalised by the WHOLE batch's totals, so micro-batch losses add
    up to the batch loss."""
    per_token = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # already masked
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    tok, seq = TrainerConfig(aggregation="token_mean"), TrainerConfig(aggregation="seq_mean_token_mean")
    assert _aggregate(per_token, {"loss_mask": mask}, tok, 3.0, 2.0).item() == pytest.approx(2.0)  # 6/3
    assert _aggregate(per_token, {"loss_mask": mask}, seq, 3.0, 2.0).item() == pytest.approx(
        2.25
    )  # (1.5+3)/2
    halves = [
        _aggregate(per_token[k : k + 1], {"loss_mask": mask[k : k + 1]}, seq, 3.0, 2.0) for k in range(3)
    ]
    assert sum(h.item() for h in halves) == pytest.approx(2.25)  # micro-batches add up to the batch
