"""``driver.grpo.epochs``: each pass over a round's sequences takes ``updates_per_round`` optimizer steps over
mini-batches of whole episodes, and every pass covers every episode once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from maigym_ray.config import EnvManagerConfig, PolicyConfig
from maigym_ray.rl.driver import Driver, DriverConfig, GRPOConfig
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.rl.trainer import TrainerConfig
from maigym_ray.testing import fake_task


class RecordingTrainer:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def update(self, seqs: list[Any], objective: str = "grpo") -> dict[str, float]:
        self.batches.append(sorted(s.episode_id for s in seqs))
        return {"loss": float(len(self.batches)), "kl": 0.0, "clip_frac": 0.0, "tokens": 10.0}


@pytest.mark.parametrize(("epochs", "updates"), [(1, 1), (3, 1), (2, 2)])
def test_each_epoch_takes_its_steps_over_every_episode(tmp_path: Any, epochs: int, updates: int) -> None:
    cfg = DriverConfig(grpo=GRPOConfig(updates_per_round=updates, epochs=epochs))
    d = Driver(
        cfg,
        PolicyConfig(),
        TrainerConfig(),
        SamplerConfig(),
        EnvManagerConfig(),
        [fake_task("t0")],
        [],
        str(tmp_path),
        wandb_mode="disabled",
    )
    trainer = RecordingTrainer()
    d.trainer = trainer  # type: ignore[assignment]
    seqs = [SimpleNamespace(episode_id=f"e{i}") for i in range(4)]
    stats = d._update(seqs)  # type: ignore[arg-type]
    assert len(trainer.batches) == epochs * updates
    for e in range(epochs):
        passed = trainer.batches[e * updates : (e + 1) * updates]
        assert sorted(x for b in passed for x in b) == ["e0", "e1", "e2", "e3"]
    steps = epochs * updates
    assert stats["loss"] == pytest.approx(sum(range(1, steps + 1)) / steps)  # averaged over the steps
    assert stats["tokens"] == 10.0 * steps  # summed
