"""Packing: window-wise trains each step exactly once in one sequence per window; step-wise one per step."""

from __future__ import annotations

import random

import pytest

from maigym_ray.harness.history import HistoryConfig, prompt_ids, window_of
from maigym_ray.rl.packing import PackedSequence, micro_batches, pack, pack_step, pack_window
from maigym_ray.types import Reward, Trajectory, Turn

pytestmark = pytest.mark.unit


def make_traj(cfg: HistoryConfig, steps: int, seed: int = 0) -> Trajectory:
    rng = random.Random(seed)
    header = [rng.randrange(50) for _ in range(8)]
    obs = [[100 + rng.randrange(50) for _ in range(rng.randint(3, 6))] for _ in range(steps)]
    resp = [[1000 + 10 * t + j for j in range(rng.randint(1, 4))] for t in range(steps)]
    turns = tuple(
        Turn(
            t,
            "wait()",
            None,
            prompt_ids=tuple(prompt_ids(header, obs, resp, t, cfg)),
            response_ids=tuple(resp[t]),
            logprobs=tuple(-0.01 * (t + 1) for _ in resp[t]),
        )
        for t in range(steps)
    )
    return Trajectory("ep", "task", "web", turns, Reward(1.0, True))


def trained_tokens(seqs) -> list[tuple[int, float]]:
    return [
        (tok, lp)
        for s in seqs
        for tok, m, lp in zip(s.input_ids, s.loss_mask, s.old_logprobs, strict=True)
        if m
    ]


@pytest.mark.parametrize(("k", "o", "steps"), [(10, 2, 27), (4, 1, 13), (5, 0, 11), (10, 2, 7)])
def test_window_packing_trains_each_step_exactly_once(k, o, steps):
    cfg = HistoryConfig("window", k, o)
    traj = make_traj(cfg, steps, seed=k + o + steps)
    seqs = pack_window(traj, cfg, advantage=0.5)
    expected_windows = len({window_of(t, k, o) for t in range(steps)})
    assert len(seqs) == expected_windows
    assert sorted(t for s in seqs for t in s.steps) == list(range(steps))  # each step in exactly one window
    expected = [(tok, lp) for u in traj.turns for tok, lp in zip(u.response_ids, u.logprobs, strict=True)]
    assert sorted(trained_tokens(seqs)) == sorted(expected)  # every sampled token once, with its logprob
    assert all(s.advantage == 0.5 and len(s.loss_mask) == len(s.input_ids) for s in seqs)


def test_step_packing_is_one_sequence_per_step_and_costs_more_tokens():
    cfg = HistoryConfig("window", 10, 2)
    traj = make_traj(cfg, 27)
    window, step = pack(traj, cfg, 1.0), pack_step(traj, 1.0)
    assert len(step) == 27 and sorted(trained_tokens(step)) == sorted(trained_tokens(window))
    assert sum(map(len, window)) < sum(map(len, step)) / 3  # the same training signal in far fewer tokens


def test_window_packing_rejects_a_trajectory_without_the_prefix_property():
    traj = make_traj(HistoryConfig("step", last_k=1), 6)
    with pytest.raises(ValueError, match="not a prefix"):
        pack_window(traj, HistoryConfig("window", 10, 2), 1.0)


def test_micro_batches_respect_the_budget_and_keep_everything():
    cfg = HistoryConfig("step", last_k=3)
    seqs = pack_step(make_traj(cfg, 30, seed=3), 1.0)
    batches = micro_batches(seqs, token_budget=120)
    assert sorted(id(s) for b in batches for s in b) == sorted(id(s) for s in seqs)
    # the budget bounds the padded micro-batch, what collate allocates
    assert all(len(b) * max(map(len, b)) <= 120 or len(b) == 1 for b in batches)
    assert len(micro_batches(seqs, token_budget=1)) == len(seqs)
    with pytest.raises(ValueError):
        micro_batches(seqs, 0)


def _seq(length: int) -> PackedSequence:
    return PackedSequence((1,) * length, (1,) * length, (0.0,) * length, 1.0, "e", (0,))


def test_one_long_sequence_does_not_pad_the_others():
    # the learning guard's round: one 269-token reply among 95 of 157. Its unpadded total (15,184) fits the
    # budget, but as one micro-batch it pads to 96 × 269 = 25,824 tokens
    seqs = [_seq(157)] * 50 + [_seq(269)] + [_seq(157)] * 45
    batches = micro_batches(seqs, token_budget=16384)
    assert sorted(len(b) for b in batches) == [1, 95]
    assert sum(len(b) * max(map(len, b)) for b in batches) == 269 + 95 * 157
    # within the budget too, a micro-batch of its own saves more padding (47 × 109) than it costs
    assert sorted(len(b) for b in micro_batches([_seq(269)] + [_seq(160)] * 47, 16384)) == [1, 47]


def test_a_micro_batch_must_save_more_padding_than_its_overhead():
    seqs = [_seq(11)] + [_seq(10)] * 9  # splitting saves 9 padded tokens
    assert [len(b) for b in micro_batches(seqs, 1000, overhead=128)] == [10]
    assert sorted(len(b) for b in micro_batches(seqs, 1000, overhead=0)) == [1, 9]
    assert sorted(len(b) for b in micro_batches([_seq(10)] * 10, token_budget=30)) == [1, 3, 3, 3]
    with pytest.raises(ValueError, match="overhead"):
        micro_batches(seqs, 1000, overhead=-1)
