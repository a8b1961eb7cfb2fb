"""The adaptive sampler gives full groups only to informative tasks and saves its state."""

from __future__ import annotations

import json

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.rl.sampler import AdaptiveSampler, SamplerConfig

pytestmark = pytest.mark.unit


def test_full_groups_only_for_informative_tasks():
    s = AdaptiveSampler(["never", "mastered", "learning", "unseen"], SamplerConfig(probe_rate=1.0), seed=1)
    s.update("never", [0.0] * 8)
    s.update("mastered", [1.0] * 7 + [0.0])
    s.update("learning", [1.0, 0.0, 0.0, 1.0])
    assert [s.category(t) for t in s.task_ids] == ["never", "mastered", "learning", "unseen"]
    plan = dict(s.plan(num_groups=4))
    assert plan == {"learning": 8, "unseen": 8, "never": 2, "mastered": 2}
    assert set(dict(s.plan(num_groups=2))) == {"learning", "unseen"}  # informative tasks come first


def test_probes_are_occasional_and_notice_a_task_that_became_solvable():
    s = AdaptiveSampler([f"t{i}" for i in range(40)], SamplerConfig(probe_rate=0.25, window=4), seed=0)
    for t in s.task_ids:
        s.update(t, [0.0] * 4)
    probes = [len(s.plan(num_groups=40)) for _ in range(200)]
    assert 0.15 * 40 < sum(probes) / len(probes) < 0.35 * 40
    s.update("t3", [1.0, 0.0])  # the policy starts solving it: it leaves "never" at once
    assert s.category("t3") == "learning" and dict(s.plan(40))["t3"] == 8


def test_uniform_mode_and_state_round_trip():
    u = AdaptiveSampler(["a", "b", "c"], SamplerConfig(mode="uniform"), seed=0)
    u.update("a", [0.0] * 8)
    assert sorted(u.plan(3)) == [("a", 8), ("b", 8), ("c", 8)]
    s = AdaptiveSampler(["a", "b"], seed=5)
    s.update("a", [1.0, 0.0])
    state = json.loads(json.dumps(s.state_dict()))  # JSON-able, as checkpoints store it
    r = AdaptiveSampler(["a", "b"], seed=99)
    r.load_state_dict(state)
    assert r.success_rate("a") == 0.5 and r.category("b") == "unseen"
    assert r.plan(2) == s.plan(2)  # the RNG continues where it stopped
    with pytest.raises(ConfigError):
        AdaptiveSampler(["a"], SamplerConfig(mode="greedy"))


def test_learning_share_revisits_tasks_whose_groups_disagreed_before_unseen_ones():
    ids = [f"t{i}" for i in range(500)]
    learning = {"t7", "t42", "t99", "t300"}

    def sampler(share: float) -> AdaptiveSampler:
        s = AdaptiveSampler(ids, SamplerConfig(learning_share=share, probe_rate=0.0), seed=3)
        for t in learning:
            s.update(t, [1.0, 0.0, 0.0, 0.0])
        return s

    # Drawn alike, four learning tasks among 500 hardly ever make a round of six groups.
    s0 = sampler(0.0)
    hits = sum(len(learning & set(dict(s0.plan(6)))) for _ in range(100))
    assert hits < 20
    # At 0.5 three of the six groups revisit learning tasks, the rest explore unseen ones, every round.
    s = sampler(0.5)
    for _ in range(20):
        plan = s.plan(6)
        assert len(plan) == 6 and all(g == 8 for _, g in plan)
        assert len(learning & set(dict(plan))) == 3
    # At 1.0 every learning task comes first; unseen ones fill the rest.
    assert learning <= set(dict(sampler(1.0).plan(6)))
    with pytest.raises(ConfigError, match="learning_share"):
        SamplerConfig(learning_share=1.5)
