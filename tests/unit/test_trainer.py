"""The torch trainer: window packing and step packing give the same update; micro-batching changes nothing."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from maigym_ray.errors import ConfigError
from maigym_ray.harness.history import HistoryConfig, prompt_ids
from maigym_ray.rl.packing import pack_step, pack_window
from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig, collate, token_logprobs
from maigym_ray.types import Reward, Trajectory, Turn

pytestmark = [pytest.mark.unit, pytest.mark.numeric]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    from maigym_ray.policy.tiny_models import build_text_model

    path = build_text_model(tmp_path_factory.mktemp("m") / "text")
    return AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="eager")


def traj(cfg: HistoryConfig, steps: int, seed: int) -> Trajectory:
    rng = random.Random(seed)
    header = [rng.randrange(5, 2000) for _ in range(12)]
    obs = [[rng.randrange(5, 2000) for _ in range(rng.randint(6, 12))] for _ in range(steps)]
    resp = [[rng.randrange(5, 2000) for _ in range(rng.randint(2, 5))] for _ in range(steps)]
    turns = tuple(
        Turn(
            t,
            "wait()",
            None,
            prompt_ids=tuple(prompt_ids(header, obs, resp, t, cfg)),
            response_ids=tuple(resp[t]),
            logprobs=tuple(-7.5 for _ in resp[t]),
        )
        for t in range(steps)
    )
    return Trajectory(f"ep{seed}", "task", "web", turns, Reward(1.0, True))


def grads_after(model, seqs, cfg: TrainerConfig) -> list[torch.Tensor]:
    m = copy.deepcopy(model)
    trainer = TorchTrainer(m, cfg)
    trainer.opt = torch.optim.SGD(m.parameters(), lr=0.0)  # keep the weights: compare gradients only
    trainer.update(seqs)
    return [p.grad.clone() for p in m.parameters()]


def test_window_and_step_packing_give_the_same_gradient(model):
    cfg = HistoryConfig("window", 4, 1)
    trajs = [traj(cfg, 9, seed) for seed in (1, 2)]
    window = [s for i, t in enumerate(trajs) for s in pack_window(t, cfg, advantage=(1.0, -0.5)[i])]
    step = [s for i, t in enumerate(trajs) for s in pack_step(t, advantage=(1.0, -0.5)[i])]
    assert sum(map(len, window)) < sum(map(len, step))
    tc = TrainerConfig(grad_clip=0.0)
    for a, b in zip(grads_after(model, window, tc), grads_after(model, step, tc), strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-3)


def test_micro_batching_does_not_change_the_update(model):
    cfg = HistoryConfig("window", 4, 1)
    seqs = pack_window(traj(cfg, 9, 3), cfg, 1.0) + pack_window(traj(cfg, 7, 4), cfg, -1.0)
    one = grads_after(model, seqs, TrainerConfig(grad_clip=0.0, token_budget=10_000))
    many = grads_after(model, seqs, TrainerConfig(grad_clip=0.0, token_budget=1))
    for a, b in zip(one, many, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_update_moves_the_policy_towards_positive_advantage(model):
    cfg = HistoryConfig("step", last_k=2)
    seqs = pack_step(traj(cfg, 4, 5), advantage=1.0)
    m = copy.deepcopy(model)
    b = collate(seqs)
    before = (token_logprobs(m, b["input_ids"], b["attention_mask"]) * b["loss_mask"]).sum()
    trainer = TorchTrainer(m, TrainerConfig(lr=1e-2, old_logprobs="recompute"))
    stats = trainer.update(seqs)
    after = (token_logprobs(m, b["input_ids"], b["attention_mask"]) * b["loss_mask"]).sum()
    assert after > before and stats["tokens"] == sum(map(len, seqs)) and stats["update_s"] > 0


def test_masked_token_logprobs_equal_the_full_forward_on_the_mask(model) -> None:
    """The fast path (LM head on masked positions only) gives the full forward's logprobs there, 0 elsewhere,
    and the same gradients."""
    m = copy.deepcopy(model)
    b = collate(pack_window(traj(HistoryConfig(), 6, 3), HistoryConfig(), 1.0))
    full = token_logprobs(m, b["input_ids"], b["attention_mask"])
    fast = token_logprobs(m, b["input_ids"], b["attention_mask"], b["loss_mask"])
    sel = b["loss_mask"] > 0
    assert sel.any() and not sel.all()
    torch.testing.assert_close(fast[sel], full[sel], rtol=1e-5, atol=1e-6)
    assert (fast[~sel] == 0).all()
    (full * b["loss_mask"]).sum().backward()
    g_full = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    (fast * b["loss_mask"]).sum().backward()
    for a, g in zip(g_full, [p.grad for p in m.parameters()], strict=True):
        torch.testing.assert_close(a, g, rtol=1e-4, atol=1e-6)


def test_round_old_logprobs_are_the_model_s_own_on_the_trained_tokens(model) -> None:
    """``old_logprobs: round``: the trainer replaces the engine's logprobs (here made up: a constrained engine
    returns the masked distribution's) by its own, token-aligned, 0 off the mask; the first clipped pass then
    starts at ratio 1 and clips nothing, where the masked logprobs (higher than the model's) would clip every
    token of a negative advantage to zero gradient."""
    import dataclasses

    m = copy.deepcopy(model)
    seqs = pack_window(traj(HistoryConfig(), 6, 3), HistoryConfig(), -1.0)
    wrong = [dataclasses.replace(s, old_logprobs=tuple(-0.01 * k for k in s.loss_mask)) for s in seqs]
    # the grammar forced the first trained token of every sequence: the engine sampled it with logprob 0
    forced = [s.loss_mask.index(1) for s in wrong]
    wrong = [
        dataclasses.replace(s, old_logprobs=tuple(0.0 if t == f else o for t, o in enumerate(s.old_logprobs)))
        for s, f in zip(wrong, forced, strict=True)
    ]
    trainer = TorchTrainer(m, TrainerConfig(lr=1e-3, grad_clip=0.0, old_logprobs="round", token_budget=1))
    fixed = trainer.logprobs(wrong)
    assert [s.input_ids for s in fixed] == [s.input_ids for s in seqs]
    for s, f, before in zip(fixed, forced, seqs, strict=True):  # forced tokens leave the loss, no others
        assert s.loss_mask == tuple(0 if t == f else k for t, k in enumerate(before.loss_mask))
    b = collate(fixed)
    own = token_logprobs(m, b["input_ids"], b["attention_mask"], collate(seqs)["loss_mask"])
    torch.testing.assert_close(b["old_logprobs"], own * b["loss_mask"], rtol=1e-5, atol=1e-6)
    assert all(o == 0.0 for s in fixed for o, k in zip(s.old_logprobs, s.loss_mask, strict=True) if not k)
    assert trainer.update(fixed)["clip_frac"] == 0.0
    assert (
        TorchTrainer(copy.deepcopy(model), TrainerConfig(lr=1e-3, grad_clip=0.0)).update(wrong)["clip_frac"]
        > 0
    )
    with pytest.raises(ConfigError, match="old_logprobs"):
        TrainerConfig(old_logprobs="engine").check()
