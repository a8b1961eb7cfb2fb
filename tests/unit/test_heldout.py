"""The driver's held-out evals: how many episodes each runs, and bad settings rejected before anything starts."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.rl.driver import Driver
from maigym_ray.rl.driver_config import DriverConfig, HeldoutConfig, JobConfig, TaskSplit
from maigym_ray.rollout import Finished
from maigym_ray.testing import fake_task

pytestmark = pytest.mark.unit


def _driver(tmp_path: Any, heldout: HeldoutConfig, ran: dict[str, int]) -> Driver:
    tasks = TaskSplit(train=[fake_task("train-0")], heldout=[fake_task(f"test-{i}") for i in range(3)])
    d = Driver(
        JobConfig(driver=DriverConfig(heldout=heldout), run_dir=str(tmp_path), wandb_mode="disabled"), tasks
    )
    d._store = lambda name, trajs: None  # type: ignore[method-assign]

    async def rollouts(work: list[Any], policy: Any, what: str) -> list[Finished]:
        ran[what] = len(work)
        traj = SimpleNamespace(reward=SimpleNamespace(success=True), infra_failed=False, turns=(None,) * 2)
        return [Finished(item, task, plat, traj, 0, 0.1) for item, task, plat in work]  # type: ignore[arg-type]

    d._rollouts = rollouts  # type: ignore[method-assign]
    return d


def test_the_eval_before_training_can_run_fewer_episodes_than_the_later_ones(tmp_path: Any) -> None:
    ran: dict[str, int] = {}
    d = _driver(tmp_path, HeldoutConfig(episodes_per_task=4, before_episodes_per_task=1), ran)
    for label in ("before", "sft", "rl"):
        assert asyncio.run(d.evaluate(label)) == 1.0
    assert ran == {"held-out before": 3, "held-out sft": 12, "held-out rl": 12}
    assert d.state.heldout_steps == {"before": 2.0, "sft": 2.0, "rl": 2.0}


def test_by_default_every_eval_runs_the_same_episodes(tmp_path: Any) -> None:
    ran: dict[str, int] = {}
    d = _driver(tmp_path, HeldoutConfig(episodes_per_task=2), ran)
    asyncio.run(d.evaluate("before"))
    asyncio.run(d.evaluate("rl"))
    assert ran == {"held-out before": 6, "held-out rl": 6}


@pytest.mark.parametrize("bad", [{"episodes_per_task": 0}, {"before_episodes_per_task": -1}])
def test_a_held_out_eval_without_episodes_is_a_config_error(bad: dict[str, int]) -> None:
    with pytest.raises(ConfigError, match="heldout"):
        HeldoutConfig(**bad)
