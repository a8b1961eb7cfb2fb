"""Colocated mode: the engines sleep through every train step and wake before the weight sync (as in verl).

The driver runs here without Ray: engines and trainer are stand-ins that log each call, so the test sees the
order in which the driver makes them. A stand-in engine, like the real one (policy/engine.py), refuses to
receive weights while asleep and the stand-in trainer refuses to train while an engine is awake.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from maigym_ray.rl import driver as driver_module
from maigym_ray.rl.driver import Driver
from maigym_ray.rl.driver_config import DriverConfig, GRPOConfig, JobConfig, SFTConfig, TaskSplit
from maigym_ray.rl.roles import Roles
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.rollout import Finished
from maigym_ray.testing import ScriptedEngine, fake_task

pytestmark = pytest.mark.unit


class _Remote:
    """``handle.method.remote(...)`` of a Ray actor, for a plain object: returns the coroutine (awaitable)."""

    def __init__(self, fn: Any) -> None:
        self.remote = fn


class LoggedEngine:
    def __init__(self, i: int, log: list[str]) -> None:
        self.i, self.log, self.asleep = i, log, False
        self.sleep, self.wake_up = _Remote(self._sleep), _Remote(self._wake)
        self.receive_weights = _Remote(self._receive)
        self.busy_seconds = _Remote(self._busy)

    async def _busy(self) -> float:
        return 0.0

    async def _sleep(self, level: int = 1) -> None:
        self.asleep = True
        self.log.append(f"sleep {self.i}")

    async def _wake(self) -> None:
        self.asleep = False
        self.log.append(f"wake {self.i}")

    async def _receive(self, layout: Any, version: int, group: str) -> dict[str, float]:
        assert not self.asleep, "weights sent to a sleeping engine"
        self.log.append(f"receive {self.i} v{version}")
        # like policy/engine.py: the version it now serves and the tensors it loaded
        return {"tensors": float(sum(len(b["names"]) for b in layout)), "version": float(version)}


class LoggedTrainer:
    def __init__(self, log: list[str], engines: list[LoggedEngine]) -> None:
        self.log, self.engines = log, engines

    def update(self, seqs: list[Any], objective: str = "grpo") -> dict[str, float]:
        self.log.append(f"update {objective}")
        self.awake_during_update = [e.i for e in self.engines if not e.asleep]
        return {"loss": 0.5, "kl": 0.0, "clip_frac": 0.0, "tokens": 1.0}

    def set_lr(self, lr: float) -> None:
        pass

    def freeze_reference(self) -> None:
        pass

    async def _send(self) -> None:
        self.log.append("send")

    def send_weights(self, layout: Any, group: str) -> Any:
        return self._send()


def _driver(tmp_path: Any, colocated: bool, log: list[str]) -> Driver:
    engines = [LoggedEngine(0, log), LoggedEngine(1, log)]
    cfg = DriverConfig(
        sft=SFTConfig(steps=2, batch_size=0), grpo=GRPOConfig(groups_per_round=1, updates_per_round=2)
    )
    job = JobConfig(
        driver=cfg, sampler=SamplerConfig(group_size=2), run_dir=str(tmp_path), wandb_mode="disabled"
    )
    d = Driver(
        job, TaskSplit(train=[fake_task("t0")], heldout=[]), Roles(engines=engines, colocated=colocated)
    )
    d.trainer = LoggedTrainer(log, engines)  # type: ignore[assignment]
    d._store = lambda name, trajs: None  # type: ignore[method-assign]

    async def rollouts(work: list[Any], policy: Any, what: str) -> list[Finished]:
        assert not any(e.asleep for e in engines), f"{what}: rollouts on a sleeping engine"
        log.append(what.split()[0])
        # two attempts of one task, one success and one failure: a group with a GRPO gradient
        return [
            Finished(item, task, platform, _traj(j % 2), 0, 0.1)
            for j, (item, task, platform) in enumerate(work)
        ]

    d._rollouts = rollouts  # type: ignore[method-assign]
    return d


def _traj(value: float) -> Any:
    return SimpleNamespace(
        reward=SimpleNamespace(value=value, success=value > 0),
        infra_failed=False,
        turns=(SimpleNamespace(action=object()),) * 3,  # three well-formed steps
    )


@pytest.fixture
def packed(monkeypatch: pytest.MonkeyPatch) -> None:
    n = iter(range(1000))
    monkeypatch.setattr(
        driver_module, "pack", lambda t, h, a, skip: [SimpleNamespace(episode_id=f"e{next(n)}")]
    )


def test_colocated_engines_sleep_through_the_train_step_and_wake_before_the_sync(tmp_path, packed):
    log: list[str] = []
    d = _driver(tmp_path, colocated=True, log=log)
    asyncio.run(d.sft())
    # the trainer's send and the engines' receives of one broadcast run at once: their order is free
    assert log[:7] == ["demos", "sleep 0", "sleep 1", "update sft", "update sft", "wake 0", "wake 1"]
    assert sorted(log[7:]) == ["receive 0 v1", "receive 1 v1", "send"]
    assert d.trainer.awake_during_update == []  # type: ignore[union-attr]
    log.clear()
    metrics = asyncio.run(d.grpo_round(0))
    assert metrics["sequences"] > 0
    # rollouts on awake engines, then sleep, train, wake, and only then the weights
    assert log[:7] == ["round", "sleep 0", "sleep 1", "update grpo", "update grpo", "wake 0", "wake 1"]
    assert sorted(log[7:]) == ["receive 0 v2", "receive 1 v2", "send"]


def test_disaggregated_engines_never_sleep(tmp_path, packed):
    log: list[str] = []
    d = _driver(tmp_path, colocated=False, log=log)
    asyncio.run(d.sft())
    asyncio.run(d.grpo_round(0))
    assert not [e for e in log if e.startswith(("sleep", "wake"))]
    assert d.trainer.awake_during_update == [0, 1]  # type: ignore[union-attr]


def test_a_sleeping_engine_refuses_to_generate_until_it_wakes():
    from maigym_ray.errors import MaigymError
    from maigym_ray.generation import SamplingConfig

    engine = ScriptedEngine([[5, 6]])
    sampling = SamplingConfig(max_tokens=4)

    async def go() -> None:
        assert (await engine.sleep())["asleep"]
        with pytest.raises(MaigymError, match="asleep"):
            await engine.generate([1, 2], [], sampling, "ep")
        await engine.wake_up()
        assert (await engine.generate([1, 2], [], sampling, "ep")).response_ids == (5, 6)

    asyncio.run(go())


def test_a_broadcast_that_leaves_an_engine_on_old_weights_is_an_infra_error(tmp_path, packed):
    """The version check after every broadcast: an engine that answers with another version, or with fewer
    tensors than the layout holds, stops the run instead of sampling off-policy unnoticed."""
    from maigym_ray.errors import InfraError

    log: list[str] = []
    d = _driver(tmp_path, colocated=False, log=log)
    d.publisher.layout = [{"names": ["a", "b"]}, {"names": ["c"]}]
    asyncio.run(d._broadcast())  # both engines load 3 tensors at version 1
    stale = d.engines[1]

    async def keeps_old(layout: Any, version: int, group: str) -> dict[str, float]:
        return {"tensors": 3.0, "version": float(version - 1)}

    stale.receive_weights = _Remote(keeps_old)
    with pytest.raises(InfraError, match=r"version 2 \(3 tensors\) did not land: .*\(1, 1, 3\)"):
        asyncio.run(d._broadcast())

    async def drops_one(layout: Any, version: int, group: str) -> dict[str, float]:
        return {"tensors": 2.0, "version": float(version)}

    stale.receive_weights = _Remote(drops_one)
    with pytest.raises(InfraError, match=r"\(1, 3, 2\)"):
        asyncio.run(d._broadcast())
