"""``driver.mode=async``: the everlasting pool (rl/group_stream.py) feeds the driver's own GRPO round.

The driver runs without Ray: an episode is a coroutine that takes simulated time and records on its first turn
the version the engines served when it began; the trainer's update sleeps in its thread; the weight broadcast
is a stand-in that answers with the version. What must hold:

- rollouts go on while the trainer updates (episodes end during an update);
- no group trains past ``max_staleness``, and the rule's two halves (admission and the check at consumption)
  each keep it: with admission alone off, groups past the bound are stored as stale and replaced;
- every episode the pool started is recorded once (trained or stale), none is left in flight at the end;
- ``max_staleness=0`` trains synchronously through the pool (staleness 0 everywhere).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.rl import driver as driver_module
from maigym_ray.rl import group_stream
from maigym_ray.rl.driver import Driver
from maigym_ray.rl.driver_config import DriverConfig, GRPOConfig, JobConfig, SFTConfig, TaskSplit
from maigym_ray.rl.group_stream import pool_lanes
from maigym_ray.rl.packing import PackedSequence
from maigym_ray.rl.roles import Roles
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.rl.staleness import group_version, may_start, staleness
from maigym_ray.rollout import Finished
from maigym_ray.testing import fake_task

pytestmark = pytest.mark.unit


class _Remote:
    def __init__(self, fn: Any) -> None:
        self.remote = fn


class _Engine:
    def __init__(self) -> None:
        self.receive_weights = _Remote(self._receive)
        self.busy_seconds = _Remote(self._busy)

    async def _receive(self, layout: Any, version: int, group: str) -> dict[str, float]:
        await asyncio.sleep(0.01)
        return {"tensors": 0.0, "version": float(version)}

    async def _busy(self) -> float:
        return 0.0


class _Trainer:
    """Updates take ``update_s`` of wall time in the driver's worker thread; records when they ran."""

    def __init__(self, update_s: float) -> None:
        self.update_s = update_s
        self.spans: list[tuple[float, float]] = []
        self.threads: set[int] = set()

    def update(self, seqs: list[Any], objective: str = "grpo") -> dict[str, float]:
        t0 = time.perf_counter()
        self.threads.add(threading.get_ident())
        time.sleep(self.update_s)
        self.spans.append((t0, time.perf_counter()))
        return {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "tokens": 1.0, "clipped_s1": 1.0, "trained_s1": 4.0}

    def set_lr(self, lr: float) -> None:
        pass

    async def _send(self) -> None:
        pass

    def send_weights(self, layout: Any, group: str) -> Any:
        return self._send()


def _driver(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, success_p: float = 0.5, **driver: Any
) -> tuple[Driver, dict[str, Any]]:
    cfg = DriverConfig(
        sft=SFTConfig(steps=0),
        grpo=GRPOConfig(rounds=4, groups_per_round=2, updates_per_round=1, reference_model=False),
        concurrency=4,
        mode="async",
        **driver,
    )
    job = JobConfig(
        driver=cfg, sampler=SamplerConfig(group_size=2), run_dir=str(tmp_path), wandb_mode="disabled"
    )
    tasks = [fake_task(f"t{i}") for i in range(4)]
    d = Driver(job, TaskSplit(train=tasks, heldout=[]), Roles(engines=[_Engine()], colocated=False))
    d.trainer = _Trainer(0.15)  # type: ignore[assignment]
    seen: dict[str, Any] = {"stored": {}, "starts": [], "ends": [], "started": 0}
    d._store = lambda name, trajs: seen["stored"].__setitem__(name, list(trajs))  # type: ignore[method-assign]
    rng = random.Random(0)

    async def run_rollouts(
        manager: Any, work: list[Any], policy: Any, engines: Any, *a: Any, **k: Any
    ) -> Any:
        ((item, task, plat),) = work
        seen["started"] += 1
        seen["starts"].append(time.perf_counter())
        version = d.state.version
        await asyncio.sleep(rng.uniform(0.02, 0.12))
        seen["ends"].append(time.perf_counter())
        success = rng.random() < success_p
        traj = SimpleNamespace(
            episode_id=f"{item}",
            reward=SimpleNamespace(value=float(success), success=success),
            infra_failed=False,
            turns=(SimpleNamespace(index=0, action=object(), policy_version=version),),
        )
        return [Finished(item, task, plat, traj, 0, 0.1)]

    monkeypatch.setattr(driver_module, "run_rollouts", run_rollouts)
    monkeypatch.setattr(
        driver_module,
        "pack",
        lambda t, h, a, skip: [PackedSequence((1, 2), (0, 1), (0.0, -0.5), a, t.episode_id, (0,))],
    )
    return d, seen


async def _rounds(d: Driver) -> list[dict[str, Any]]:
    out = []
    try:
        while d.state.round < d.cfg.grpo.rounds:
            out.append(await d.grpo_round(d.state.round))
            d.state.round += 1
        assert d._stream is not None and d._stream.in_flight == 0  # the budget leaves nothing running
    finally:
        await d._close_stream()
    return out


def _recorded(seen: dict[str, Any]) -> list[str]:
    return [t.episode_id for trajs in seen["stored"].values() for t in trajs]


def test_the_pool_rolls_out_while_the_trainer_updates_and_every_episode_is_recorded_once(
    tmp_path, monkeypatch
):
    d, seen = _driver(tmp_path, monkeypatch, max_staleness=1)
    metrics = asyncio.run(_rounds(d))
    assert [m["version"] for m in metrics] == [1, 2, 3, 4]
    spans = d.trainer.spans  # type: ignore[union-attr]
    # an episode that ENDS inside an update ran on: a driver that blocked its event loop would stall them all
    during = [t for t in seen["ends"] if any(a < t < b for a, b in spans)]
    assert during, "no episode went on while the trainer was updating"
    assert all(m["staleness_mean"] <= 1 for m in metrics)
    assert any(m["staleness_mean"] > 0 for m in metrics)  # it did train on data one version old
    ids = _recorded(seen)
    assert len(ids) == len(set(ids)) == seen["started"]  # every episode once, trained or stale
    assert metrics[0]["clip_frac_by_staleness"] == {1: 0.25}  # summed counts, then the fraction


def test_without_admission_groups_past_the_bound_are_stored_stale_and_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(group_stream, "may_start", lambda *a: True)  # only the check at consumption is left
    d, seen = _driver(tmp_path, monkeypatch, max_staleness=0, pool_oversubscription=3.0)
    metrics = asyncio.run(_rounds(d))
    assert all(m["staleness_mean"] == 0 for m in metrics)  # nothing past the bound trained
    stale = sum(m["stale_groups"] for m in metrics)
    assert stale > 0 and any(k.startswith("rl/stale-") for k in seen["stored"])
    trained = sum(len(v) for k, v in seen["stored"].items() if k.startswith("rl/round-"))
    assert trained == 4 * 2 * 2  # rounds x groups x attempts: each round still trained on a full set
    ids = _recorded(seen)
    assert len(ids) == len(set(ids)) == seen["started"]


def test_max_staleness_zero_is_synchronous_training_through_the_pool(tmp_path, monkeypatch):
    d, seen = _driver(tmp_path, monkeypatch, max_staleness=0)
    metrics = asyncio.run(_rounds(d))
    assert all(m["staleness_mean"] == 0 and m["stale_groups"] == 0 for m in metrics)
    # no episode of round r + 1 starts before round r's update and broadcast are done
    spans = d.trainer.spans  # type: ignore[union-attr]
    assert not [t for t in seen["starts"] if any(a < t < b for a, b in spans)]


def test_rounds_with_nothing_to_train_on_still_let_the_pool_go_on(tmp_path, monkeypatch):
    """Every attempt succeeds: no group has an advantage, no weights are published, and the version stays. The
    admission counts updates, not versions, so the next rounds' groups still start (counting versions, the
    pool would stall after the first rounds' groups and this test would time out)."""
    d, seen = _driver(tmp_path, monkeypatch, success_p=1.0, max_staleness=0)
    metrics = asyncio.wait_for(_rounds(d), 30)
    metrics = asyncio.run(metrics)
    assert [m["version"] for m in metrics] == [0, 0, 0, 0] and all(m["sequences"] == 0 for m in metrics)
    assert len(_recorded(seen)) == 4 * 2 * 2


def test_the_staleness_rule():
    traj = lambda *versions: SimpleNamespace(turns=tuple(SimpleNamespace(policy_version=v) for v in versions))  # noqa: E731
    # the oldest member's first turn, whatever its later turns ran on
    assert group_version([traj(3, 4), traj(2, 5)], default=9) == 2
    assert group_version([SimpleNamespace(turns=())], default=9) == 9
    assert staleness(5, 2) == 3 and staleness(2, 5) == 0
    # k = 1, 2 groups an update: groups 0..3 may start before any update is published, 4..5 need one
    assert [may_start(n, 0, 1, 2) for n in range(5)] == [True] * 4 + [False]
    assert may_start(5, 1, 1, 2) and not may_start(6, 1, 1, 2)
    assert pool_lanes(4, 2, 2.0) == 5
    with pytest.raises(ConfigError, match="pool_oversubscription"):
        pool_lanes(4, 2, 0.5)
    with pytest.raises(ConfigError, match=r"driver\.mode"):
        DriverConfig(mode="eventually")
    with pytest.raises(ConfigError, match="max_staleness"):
        DriverConfig(max_staleness=-1)
    with pytest.raises(ConfigError, match="colocated"):
        job = JobConfig(driver=DriverConfig(mode="async"), run_dir="/tmp/x", wandb_mode="disabled")
        Driver(job, TaskSplit(train=[fake_task("t0")], heldout=[]), Roles(colocated=True))
    with pytest.raises(ConfigError, match="step_normalizer"):
        GRPOConfig(step_normalizer="per_token")
