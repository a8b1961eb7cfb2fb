"""Off-policy correction and the step normaliser of asynchronous GRPO, on the tiny text model.

- decoupled PPO: with the behaviour logprobs equal to the proximal ones the update is the uncorrected one; with
  a behaviour policy far below the proximal one every token weighs ``is_cap``; the engine's logprobs survive the
  proximal recompute (``behaviour_logprobs``);
- the clip rate per staleness counts each sequence's tokens under its own staleness;
- the step normalisers: "trajectory" makes every episode count once whatever its length; "constant" makes
  every step count alike.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from maigym_ray.errors import ConfigError
from maigym_ray.harness.history import HistoryConfig
from maigym_ray.rl.losses import decoupled_weights
from maigym_ray.rl.packing import pack_step, step_scales
from maigym_ray.rl.staleness import clip_by_staleness
from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig, collate
from tests.unit.test_trainer import grads_after, model, traj  # noqa: F401 - the module's fixture

pytestmark = [pytest.mark.unit, pytest.mark.numeric]


def test_decoupled_weights_are_the_truncated_behaviour_ratio():
    prox = torch.tensor([[-1.0, -1.0, -1.0, 0.0]])
    behav = torch.tensor([[-1.0, -2.0, -20.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    w = decoupled_weights(prox, behav, mask, cap=2.0)
    torch.testing.assert_close(w, torch.tensor([[1.0, 2.0, 2.0, 0.0]]))  # e^1 and e^19 both truncated to 2
    w = decoupled_weights(prox, behav, mask, cap=5.0)
    assert w[0, 1] == pytest.approx(torch.e) and w[0, 2] == 5.0 and not w.requires_grad


def test_the_decoupled_correction_weights_the_update_by_the_behaviour_ratio(model):  # noqa: F811
    cfg = HistoryConfig("step", last_k=2)
    seqs = pack_step(traj(cfg, 4, 5), advantage=1.0)
    trainer = TorchTrainer(copy.deepcopy(model), TrainerConfig(old_logprobs="round"))
    prox = trainer.logprobs(seqs)
    # the engine's sampled logprobs (-7.5 each in traj) are kept as the behaviour's
    assert all(s.behaviour_logprobs == o.old_logprobs for s, o in zip(prox, seqs, strict=True))
    same = [dataclasses.replace(s, behaviour_logprobs=s.old_logprobs) for s in prox]
    far = [dataclasses.replace(s, behaviour_logprobs=tuple(v - 50.0 for v in s.old_logprobs)) for s in prox]
    plain = TrainerConfig(grad_clip=0.0)
    decoupled = TrainerConfig(grad_clip=0.0, correction="decoupled", is_cap=3.0)
    g_plain = grads_after(model, same, plain)
    for a, b in zip(g_plain, grads_after(model, same, decoupled), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)  # pi_prox = pi_behav: weight 1
    for a, b in zip(g_plain, grads_after(model, far, decoupled), strict=True):
        torch.testing.assert_close(3.0 * a, b, rtol=1e-4, atol=1e-6)  # every weight truncated to the cap
    with pytest.raises(ConfigError, match="recompute"):
        TrainerConfig(correction="decoupled", old_logprobs="recompute")
    with pytest.raises(ConfigError, match="correction"):
        TrainerConfig(correction="vtrace")


def test_clip_rate_per_staleness_counts_each_sequence_under_its_own(model):  # noqa: F811
    clipped = torch.tensor([[True, False, True], [True, True, False], [False, False, False]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert clip_by_staleness(clipped, mask, torch.tensor([0, 2, 2])) == {0: (2.0, 3.0), 2: (2.0, 3.0)}
    # through an update: a pass with sampled logprobs far above the model's clips negative-advantage tokens
    cfg = HistoryConfig("step", last_k=2)
    seqs = [dataclasses.replace(s, staleness=i % 2) for i, s in enumerate(pack_step(traj(cfg, 4, 5), -1.0))]
    seqs = [dataclasses.replace(s, old_logprobs=tuple(-0.01 * k for k in s.loss_mask)) for s in seqs]
    stats = TorchTrainer(copy.deepcopy(model), TrainerConfig(grad_clip=0.0)).update(seqs)
    trained = {k: sum(sum(s.loss_mask[1:]) for s in seqs if s.staleness == k) for k in (0, 1)}
    assert stats["trained_s0"] == trained[0] and stats["trained_s1"] == trained[1]
    assert stats["clipped_s0"] + stats["clipped_s1"] == pytest.approx(
        stats["clip_frac"] * sum(trained.values())
    )


def test_step_normalisers_weigh_episodes_or_steps(model):  # noqa: F811
    cfg = HistoryConfig("step", last_k=2)
    short, long = traj(cfg, 2, 1), traj(cfg, 6, 2)
    seqs = pack_step(short, 1.0) + pack_step(long, 1.0)
    b = collate([step_scales(s, 2, "trajectory", 0) for s in pack_step(short, 1.0)])
    # every trained token of a 2-step episode weighs 1/2 / len(its response): each episode sums to 1
    assert float(b["token_scale"].sum()) == pytest.approx(1.0)
    by_traj = [
        step_scales(s, len(t.turns), "trajectory", 0) for t in (short, long) for s in pack_step(t, 1.0)
    ]
    by_step = [step_scales(s, len(t.turns), "constant", 10) for t in (short, long) for s in pack_step(t, 1.0)]
    total = {
        name: [float(collate([s])["token_scale"].sum()) for s in group]
        for name, group in (("traj", by_traj), ("step", by_step))
    }
    assert sum(total["traj"][:2]) == pytest.approx(1.0) and sum(total["traj"][2:]) == pytest.approx(1.0)
    assert all(v == pytest.approx(0.1) for v in total["step"])  # 1/k a step, whatever the episode's length
    # the three normalisers give three different updates of the same sequences
    g = [grads_after(model, s, TrainerConfig(grad_clip=0.0))[0] for s in (seqs, by_traj, by_step)]
    assert not torch.allclose(g[0], g[1]) and not torch.allclose(g[1], g[2])
    with pytest.raises(ValueError, match="normalizer"):
        step_scales(seqs[0], 2, "per_token", 0)
