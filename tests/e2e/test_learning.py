"""RL must learn: a small SFT + GRPO run on the ``fake-pick`` family (maigym_ray/testing/learning.py) raises
held-out success on fresh instances by a fixed margin, and each breakage of the learning loop takes the lift
away: a flipped advantage sign, a zero learning rate, a weight sync that never arrives.

The four runs share one SFT warm-up (same seed, same demos, so the same weights): they differ only in RL. The
settings (``LearningConfig()``'s defaults) and the margin were chosen over three seeds, each with the flipped
sign as a control: docs/experiments/2026-12-02-learning-guard.md.
"""

from __future__ import annotations

import pytest

from maigym_ray.testing.learning import LearningConfig, run_learning

pytestmark = pytest.mark.e2e

#: Held-out success after RL must beat success after SFT by at least this much (greedy evals over 96 fresh
#: instances, seed 0). Healthy runs at the defaults lifted by LIFTS_MEASURED; a flipped sign fell to 0.
MARGIN = 0.15


@pytest.fixture(scope="module")
def healthy() -> dict:
    return run_learning(LearningConfig())


def test_rl_raises_heldout_success_on_fresh_instances(healthy: dict) -> None:
    assert healthy["rl"] - healthy["sft"] >= MARGIN, healthy


@pytest.mark.parametrize(
    "broken",
    [{"advantage_sign": -1.0}, {"lr": 0.0}, {"sync": False}],
    ids=["flipped-advantage-sign", "zero-lr", "sync-never-arrives"],
)
def test_a_broken_learning_loop_shows_no_lift(broken: dict, healthy: dict) -> None:
    r = run_learning(LearningConfig(), **broken)
    assert r["sft"] == healthy["sft"]  # the same start: only RL differs
    assert r["rl"] - r["sft"] < MARGIN, (broken, r)
