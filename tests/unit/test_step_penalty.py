"""``driver.grpo.step_penalty`` in the driver's GRPO round: among a group's successes the shorter gets the
positive advantage; failures of different lengths still carry no gradient; the task sampler sees the verifier's
reward, not the shaped one. The driver runs without Ray: rollouts, packing and the trainer are stand-ins."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from maigym_ray.config import EnvManagerConfig, PolicyConfig
from maigym_ray.errors import ConfigError
from maigym_ray.rl import driver as driver_module
from maigym_ray.rl.driver import Driver, DriverConfig, GRPOConfig
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.rl.trainer import TrainerConfig
from maigym_ray.rollout import Finished
from maigym_ray.testing import fake_task


class _Trainer:
    def update(self, seqs: list[Any], objective: str = "grpo") -> dict[str, float]:
        return {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "tokens": 1.0}

    def set_lr(self, lr: float) -> None:
        pass

    async def _send(self) -> None:
        pass

    def send_weights(self, layout: Any, group: str) -> Any:
        return self._send()


def _traj(success: bool, steps: int) -> Any:
    return SimpleNamespace(
        reward=SimpleNamespace(value=float(success), success=success),
        infra_failed=False,
        turns=tuple(range(steps)),
    )


def _round(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, penalty: float, outcomes: list[tuple[bool, int]]):
    d = Driver(
        DriverConfig(grpo=GRPOConfig(groups_per_round=1, updates_per_round=1, step_penalty=penalty)),
        PolicyConfig(),
        TrainerConfig(),
        SamplerConfig(group_size=len(outcomes)),
        EnvManagerConfig(),
        [fake_task("t0")],
        [],
        str(tmp_path),
        wandb_mode="disabled",
        roles={"engines": [], "colocated": False},
    )
    d.trainer = _Trainer()  # type: ignore[assignment]
    d._store = lambda name, trajs: None  # type: ignore[method-assign]
    seen: list[list[float]] = []
    d.sampler.update = lambda tid, rewards: seen.append(list(rewards))  # type: ignore[method-assign]

    async def rollouts(work: list[Any], policy: Any, what: str) -> list[Finished]:
        return [Finished(item, t, p, _traj(*outcomes[j]), 0, 0.1) for j, (item, t, p) in enumerate(work)]

    d._rollouts = rollouts  # type: ignore[method-assign]
    advantages: list[float] = []
    monkeypatch.setattr(
        driver_module, "pack", lambda t, h, a: advantages.append(a) or [SimpleNamespace(episode_id=id(t))]
    )
    metrics = asyncio.run(d.grpo_round(0))
    return metrics, advantages, seen


def test_two_successes_of_different_length_train_only_with_a_step_penalty(tmp_path, monkeypatch):
    metrics, advantages, _ = _round(tmp_path, monkeypatch, 0.0, [(True, 3), (True, 5)])
    assert metrics["sequences"] == 0 and advantages == []  # equal rewards: no gradient
    metrics, advantages, seen = _round(tmp_path, monkeypatch, 0.02, [(True, 3), (True, 5)])
    assert metrics["sequences"] == 2
    assert advantages[0] > 0 > advantages[1]  # the 3-step success is the one reinforced
    assert seen == [[1.0, 1.0]]  # the sampler sees the verifier's rewards


def test_failures_of_different_length_still_carry_no_gradient(tmp_path, monkeypatch):
    metrics, advantages, _ = _round(tmp_path, monkeypatch, 0.02, [(False, 1), (False, 5)])
    assert metrics["sequences"] == 0 and advantages == []


def test_a_negative_step_penalty_is_refused():
    with pytest.raises(ConfigError, match="step_penalty"):
        GRPOConfig(step_penalty=-0.01)
