"""Per-step credit: a success's idle steps (the screen's elements unchanged after them) get no positive share."""

from __future__ import annotations

import dataclasses

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.harness.history import HistoryConfig
from maigym_ray.rl.credit import idle_steps, uncredited_steps
from maigym_ray.rl.driver_config import GRPOConfig
from maigym_ray.rl.packing import pack
from tests.unit.test_packing import make_traj

pytestmark = pytest.mark.unit

FORM = '[e1] textbox "" value="{v}"\n[e2] button "Submit"\ntext "{s} / 10sec"'


def with_screens(traj, screens):
    turns = tuple(dataclasses.replace(u, a11y=a) for u, a in zip(traj.turns, screens, strict=True))
    return dataclasses.replace(traj, turns=turns)


def enter_text(cfg):
    # type, a wasted click on the field, a second wasted click, then Submit; the countdown ticks throughout.
    screens = [FORM.format(v="", s=10), FORM.format(v="Tora", s=8), FORM.format(v="Tora", s=6)]
    screens.append(FORM.format(v="Tora", s=4))
    return with_screens(make_traj(cfg, 4, seed=3), screens)


def test_a_step_is_idle_when_the_next_screen_lists_the_same_elements_whatever_its_text_says():
    traj = enter_text(HistoryConfig("window", 10, 2))
    # step 0 typed (the textbox's value changed); steps 1 and 2 changed nothing but the countdown; step 3 is
    # the last, which nothing after it judges
    assert idle_steps(traj) == {1, 2}


def test_a_screen_without_accessibility_text_is_never_judged_idle():
    traj = with_screens(make_traj(HistoryConfig("window", 10, 2), 3), ["", "", ""])
    assert idle_steps(traj) == frozenset()


@pytest.mark.parametrize("strategy", ["window", "step"])
def test_effective_credit_leaves_a_successes_idle_steps_out_of_the_loss(strategy):
    cfg = HistoryConfig(strategy, 10, 2)
    traj = enter_text(cfg)
    full = pack(traj, cfg, 1.0)
    kept = pack(traj, cfg, 1.0, uncredited_steps(traj, 1.0, "effective"))
    assert sorted(t for s in full for t in s.steps) == [0, 1, 2, 3]
    assert sorted(t for s in kept for t in s.steps) == [0, 3]
    idle_tokens = {tok for u in traj.turns[1:3] for tok in u.response_ids}
    trained = [tok for s in kept for tok, m in zip(s.input_ids, s.loss_mask, strict=True) if m]
    assert trained and not idle_tokens & set(trained)  # still in the window as context, but not trained
    if strategy == "window":
        assert kept[0].input_ids == full[0].input_ids


def test_a_failures_idle_steps_keep_their_negative_advantage_and_episode_credit_keeps_all():
    traj = enter_text(HistoryConfig("window", 10, 2))
    assert uncredited_steps(traj, -0.7, "effective") == frozenset()
    assert uncredited_steps(traj, 0.0, "effective") == frozenset()
    assert uncredited_steps(traj, 0.7, "episode") == frozenset()
    with pytest.raises(ValueError, match="credit='steps'"):
        uncredited_steps(traj, 0.7, "steps")


def test_a_window_whose_steps_are_all_idle_gives_no_sequence():
    cfg = HistoryConfig("window", 2, 0)
    traj = enter_text(cfg)  # windows {0,1} and {2,3}
    seqs = pack(traj, cfg, 1.0, frozenset({0, 1}))
    assert [s.steps for s in seqs] == [(2, 3)]


def test_the_config_names_the_credit_choices():
    assert GRPOConfig(credit="effective").credit == "effective"
    with pytest.raises(ConfigError, match=r"grpo.credit='step'.*episode.*effective"):
        GRPOConfig(credit="step")
