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
        TrainerConfig(old_logprobs="engine")


def _constrained_traj(model_dir, regex: str, replies: list[str], history: HistoryConfig) -> Trajectory:
    """A trajectory whose replies were sampled under ``regex`` (token ids from the tiny model's tokenizer)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    rng = random.Random(5)
    header = [rng.randrange(5, 2000) for _ in range(10)]
    obs = [[rng.randrange(5, 2000) for _ in range(8)] for _ in replies]
    resp = [[*tok.encode(r, add_special_tokens=False), tok.eos_token_id] for r in replies]
    turns = tuple(
        Turn(
            t,
            replies[t],
            None,
            prompt_ids=tuple(prompt_ids(header, obs, resp, t, history)),
            response_ids=tuple(resp[t]),
            logprobs=tuple(-0.5 for _ in resp[t]),
            constraint=regex,
        )
        for t in range(len(replies))
    )
    return Trajectory("ep-c", "task", "web", turns, Reward(1.0, True))


def test_replies_sampled_under_a_regex_are_scored_under_its_grammar(model, tmp_path) -> None:
    """The trainer's logprob of a constrained reply is the model's softmax over the tokens the grammar allowed
    there (the policy that acted): above the full softmax's where the grammar cut choices, exactly 0 where it
    left one token, and the same under window and step packing."""
    from maigym_ray.harness.action_space import action_regex
    from maigym_ray.policy.grammar import TokenGrammar
    from maigym_ray.policy.tiny_models import build_text_model

    path = build_text_model(tmp_path / "text")
    grammar = TokenGrammar.from_model_dir(path)
    regex = action_regex(["click", "type", "terminate"], ["12", "37", "home"])
    replies = ['click(id="37")', 'type(id="12", text="hi")', 'terminate(status="success")']
    history = HistoryConfig()
    t = _constrained_traj(path, regex, replies, history)
    seqs = pack_window(t, history, 1.0)
    assert seqs[0].constraints and all(r == regex for _, _, r in seqs[0].constraints)
    for start, end, _ in seqs[0].constraints:  # the spans are the trained responses
        assert all(seqs[0].loss_mask[start:end]) and end - start in {len(u.response_ids) for u in t.turns}
    with pytest.raises(ValueError, match="grammar"):
        collate(seqs)
    b = collate(seqs, grammar=grammar)
    sel = b["loss_mask"] > 0
    assert b["allowed"].shape == (int(sel.sum()), grammar.vocab_size)
    m = copy.deepcopy(model).eval()
    with torch.no_grad():
        full = token_logprobs(m, b["input_ids"], b["attention_mask"], b["loss_mask"])
        con = token_logprobs(m, b["input_ids"], b["attention_mask"], b["loss_mask"], b["allowed"])
        logits = m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1][sel].float()
    expect = torch.log_softmax(logits.masked_fill(~b["allowed"], float("-inf")), -1)
    expect = expect.gather(-1, b["input_ids"][:, 1:][sel].unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(con[sel], expect, rtol=1e-5, atol=1e-5)
    n_allowed = b["allowed"].sum(-1)
    assert (n_allowed < grammar.vocab_size).all() and grammar.mismatches == 0
    forced = n_allowed == 1
    assert forced.any() and (con[sel][forced] == 0).all()
    assert (con[sel] >= full[sel] - 1e-6).all() and (con[sel][~forced] > full[sel][~forced]).any()
    step = collate(pack_step(t, 1.0), grammar=grammar)
    with torch.no_grad():
        con_step = token_logprobs(
            m, step["input_ids"], step["attention_mask"], step["loss_mask"], step["allowed"]
        )
    torch.testing.assert_close(
        torch.sort(con_step[step["loss_mask"] > 0]).values, torch.sort(con[sel]).values, rtol=1e-4, atol=1e-5
    )


def test_sampled_old_logprobs_of_a_constrained_reply_start_the_ratio_at_1(model, tmp_path) -> None:
    """With the engine's logprobs (the constrained distribution's) as old logprobs, a trainer with the grammar
    starts at ratio 1 and clips nothing; without the grammar it would score another policy and clip."""
    import dataclasses

    from maigym_ray.harness.action_space import action_regex
    from maigym_ray.policy.grammar import TokenGrammar
    from maigym_ray.policy.tiny_models import build_text_model

    path = build_text_model(tmp_path / "text")
    grammar = TokenGrammar.from_model_dir(path)
    regex = action_regex(["click", "terminate"], ["12", "37", "home"])
    t = _constrained_traj(path, regex, ['click(id="37")', 'click(id="home")'], HistoryConfig())
    seqs = pack_window(t, HistoryConfig(), -1.0)
    b = collate(seqs, grammar=grammar)
    with torch.no_grad():
        own = token_logprobs(model, b["input_ids"], b["attention_mask"], b["loss_mask"], b["allowed"])
    # what the engine returned: the constrained logprobs of the weights that sampled (token-indexed, 0 off mask)
    engine = [
        dataclasses.replace(s, old_logprobs=(0.0, *own[i, : len(s) - 1].tolist())) for i, s in enumerate(seqs)
    ]
    cfg = TrainerConfig(lr=1e-3, grad_clip=0.0)
    with_grammar = TorchTrainer(copy.deepcopy(model), cfg, grammar=grammar).update(engine)
    assert with_grammar["clip_frac"] == 0.0
    unconstrained = [dataclasses.replace(s, constraints=()) for s in engine]
    assert TorchTrainer(copy.deepcopy(model), cfg).update(unconstrained)["clip_frac"] > 0
    # "round" drops the tokens the grammar forced (logprob 0) from the loss: the masks follow the new loss mask
    rounded = TorchTrainer(
        copy.deepcopy(model), TrainerConfig(old_logprobs="round"), grammar=grammar
    ).logprobs(engine)
    dropped = sum(sum(s.loss_mask) for s in engine) - sum(sum(s.loss_mask) for s in rounded)
    assert dropped > 0
    b2 = collate(rounded, grammar=grammar)
    assert b2["allowed"].shape[0] == int((b2["loss_mask"] > 0).sum()) == b["allowed"].shape[0] - dropped
    kept = (b["loss_mask"] > 0) & (b2["loss_mask"] > 0)
    torch.testing.assert_close(b2["old_logprobs"][kept], own[kept], rtol=1e-5, atol=1e-5)


def test_trainable_layers_trains_the_top_layers_only_and_autocast_still_learns(model):
    """The cheap mode: with trainable_layers=1 of the tiny model's 2 layers, only layer 1 and the final norm
    change and get optimizer state; the embeddings (tied to the head) and layer 0 stay bit for bit. Under bf16
    autocast the update still raises the trained tokens' logprobs (advantage > 0)."""
    cfg = HistoryConfig("step", last_k=2)
    seqs = pack_step(traj(cfg, 4, 6), advantage=1.0)
    m = copy.deepcopy(model)
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    b = collate(seqs)
    lp0 = (token_logprobs(m, b["input_ids"], b["attention_mask"]) * b["loss_mask"]).sum()
    trainer = TorchTrainer(
        m, TrainerConfig(lr=1e-2, old_logprobs="recompute", autocast="bf16", trainable_layers=1)
    )
    trainer.update(seqs)
    changed = {n for n, p in m.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(n.startswith("model.layers.1.") or n == "model.norm.weight" for n in changed)
    assert {n for n, p in m.named_parameters() if p.requires_grad} >= changed
    assert sum(p.numel() for g in trainer.opt.param_groups for p in g["params"]) < 0.5 * sum(
        p.numel() for p in m.parameters()
    )
    lp1 = (token_logprobs(m, b["input_ids"], b["attention_mask"]) * b["loss_mask"]).sum()
    assert lp1 > lp0
    with pytest.raises(ConfigError, match="numbered decoder layers"):
        TorchTrainer(copy.deepcopy(model), TrainerConfig(trainable_layers=3))
    for bad in ({"autocast": "fp8"}, {"trainable_layers": -1}):
        with pytest.raises(ConfigError, match=rf"trainer\.{next(iter(bad))}="):
            TrainerConfig(**bad)
