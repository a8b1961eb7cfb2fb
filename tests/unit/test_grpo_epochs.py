"""``driver.grpo.epochs``: each pass over a round's sequences takes ``updates_per_round`` optimizer steps over
mini-batches of whole episodes, and every pass covers every episode once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from maigym_ray.rl.driver import Driver
from maigym_ray.rl.driver_config import DriverConfig, GRPOConfig, JobConfig, TaskSplit
from maigym_ray.rl.trainer import TrainerConfig
from maigym_ray.testing import fake_task

pytestmark = pytest.mark.unit


class RecordingTrainer:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def update(self, seqs: list[Any], objective: str = "grpo") -> dict[str, float]:
        self.batches.append(sorted(s.episode_id for s in seqs))
        return {"loss": float(len(self.batches)), "kl": 0.0, "clip_frac": 0.0, "tokens": 10.0}


def make_driver(tmp_path: Any, grpo: GRPOConfig, trainer: TrainerConfig) -> Driver:
    job = JobConfig(
        driver=DriverConfig(grpo=grpo), trainer=trainer, run_dir=str(tmp_path), wandb_mode="disabled"
    )
    return Driver(job, TaskSplit(train=[fake_task("t0")], heldout=[]))


@pytest.mark.parametrize(("epochs", "updates"), [(1, 1), (3, 1), (2, 2)])
def test_each_epoch_takes_its_steps_over_every_episode(tmp_path: Any, epochs: int, updates: int) -> None:
    d = make_driver(tmp_path, GRPOConfig(updates_per_round=updates, epochs=epochs), TrainerConfig())
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


@pytest.mark.parametrize("mode", ["sampled", "round"])
def test_round_old_logprobs_are_recomputed_once_before_the_first_pass(tmp_path: Any, mode: str) -> None:
    """``trainer.old_logprobs=round``: the weights that sampled the round give the old logprobs once, so the
    later passes' ratios measure how far the earlier passes moved (a per-pass recompute would reset them to 1)."""

    class Recomputing(RecordingTrainer):
        def __init__(self) -> None:
            super().__init__()
            self.recomputed = 0
            self.seen: list[set[str]] = []

        def logprobs(self, seqs: list[Any]) -> list[Any]:
            self.recomputed += 1
            assert not self.batches  # before any optimizer step
            return [SimpleNamespace(episode_id=s.episode_id, old="own") for s in seqs]

        def update(self, seqs: list[Any], objective: str = "grpo") -> dict[str, float]:
            self.seen.append({getattr(s, "old", "engine") for s in seqs})
            return super().update(seqs, objective)

    d = make_driver(tmp_path, GRPOConfig(epochs=3, updates_per_round=1), TrainerConfig(old_logprobs=mode))
    trainer = Recomputing()
    d.trainer = trainer  # type: ignore[assignment]
    d._update([SimpleNamespace(episode_id=f"e{i}") for i in range(4)])  # type: ignore[arg-type]
    assert trainer.recomputed == (1 if mode == "round" else 0)
    assert trainer.seen == [{"own" if mode == "round" else "engine"}] * 3
