"""Learning-rate schedules: warm-up, cosine decay, constant, bad input."""

import itertools
import math

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.rl.driver import SFTConfig
from maigym_ray.rl.schedule import lr_factor

pytestmark = pytest.mark.unit


def test_warmup_is_linear_then_cosine_decays_to_near_zero() -> None:
    f = [lr_factor(s, 20, warmup=4, kind="cosine") for s in range(20)]
    assert f[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert f[4] == pytest.approx(1.0)  # first step after warm-up is the peak
    # half a cosine over the 16 remaining steps: step 12 is a quarter turn in, factor 0.5
    assert f[12] == pytest.approx(0.5)
    assert f[19] == pytest.approx(0.5 * (1 + math.cos(math.pi * 15 / 16)))
    assert all(a >= b for a, b in itertools.pairwise(f[3:]))


def test_constant_after_warmup() -> None:
    assert [lr_factor(s, 5, warmup=2, kind="constant") for s in range(5)] == [0.5, 1.0, 1.0, 1.0, 1.0]
    assert lr_factor(0, 1, warmup=0, kind="cosine") == 1.0


def test_bad_schedule_and_step_are_errors() -> None:
    with pytest.raises(ValueError, match="choose one of"):
        lr_factor(0, 10, kind="linear")
    with pytest.raises(ValueError, match="outside"):
        lr_factor(10, 10)
    with pytest.raises(ConfigError, match=r"sft\.schedule"):
        SFTConfig(schedule="step")
