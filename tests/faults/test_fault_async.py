"""The async drill: ``driver.mode=async`` with an env actor, an engine or the trainer dying mid-update.

The driver runs its own loop (``Driver.run``) over a real EnvManager on the fake backend and real rollout Ray
tasks, with ScriptedEngine actors as engines (every second episode they serve answers wrong, so groups have
something to train on) and a stand-in trainer whose update takes real time in the driver's worker thread.
The break lands inside an update, while the everlasting pool is rolling out the next groups:

- an env actor's process dies: its episode is retried on a fresh instance and the run goes on;
- the trainer dies (its update raises) or an engine dies (the next weight publish finds it gone: an InfraError):
  the run stops; a new driver resumes it from its last checkpoint with fresh engines and a fresh trainer.

Either way: every round 0..R-1 is stored exactly once with a full set of episodes (groups × attempts), none
infra-failed and none stored twice across the two runs, and the rounds' policy versions go on from the
checkpoint without a gap or a repeat. Episodes the dead run had in flight were never recorded; the resumed
run's pool rolls those groups out anew.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from maigym_ray.errors import InfraError
from maigym_ray.harness.trajectory_store import load_trajectories
from maigym_ray.rl.driver import Driver
from maigym_ray.rl.driver_config import (
    DriverConfig,
    GRPOConfig,
    HeldoutConfig,
    JobConfig,
    SFTConfig,
    TaskSplit,
)
from maigym_ray.rl.roles import Roles
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.testing import ScriptedEngine, fake_task
from maigym_ray.testing.drills import ROLLOUT_TASK, fake_manager_config, scripted_policy, scripted_replies

pytestmark = pytest.mark.faults

ROUNDS, GROUPS, ATTEMPTS = 4, 2, 4


class DrillTrainer:
    """The trainer group's calls, holding no model: an update sleeps ``update_s`` (in the driver's worker
    thread) and runs ``on_update(n)`` first, n counting from 1; a checkpoint stores the update count."""

    def __init__(self, on_update: Any = None, update_s: float = 0.4) -> None:
        self.on_update, self.update_s, self.updates = on_update, update_s, 0

    def layout(self, bucket_bytes: int) -> list[dict[str, Any]]:
        return [{"names": ["w"], "numel": 1, "dtype": "float32"}]

    async def _done(self) -> None:
        pass

    def join_weight_group(self, world: int, group: str, backend: str) -> Any:
        return self._done()

    def send_weights(self, layout: Any, group: str) -> Any:
        return self._done()

    def update(self, seqs: list[Any], objective: str = "grpo") -> dict[str, float]:
        self.updates += 1
        if self.on_update is not None:
            self.on_update(self.updates)
        time.sleep(self.update_s)
        return {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "tokens": float(sum(len(s) for s in seqs))}

    def set_lr(self, lr: float) -> None:
        pass

    def freeze_reference(self) -> None:
        pass

    def save(self, path: Path) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "drill.json").write_text(json.dumps({"updates": self.updates}))

    def load(self, path: Path) -> None:
        self.updates = json.loads((Path(path) / "drill.json").read_text())["updates"]


def _engines(ray: Any, n: int) -> list[Any]:
    return [
        ray.remote(ScriptedEngine)
        .options(num_cpus=0)
        .remote(scripted_replies("42"), i, delay_s=0.05, wrong=scripted_replies("7"), wrong_every=2)
        for i in range(n)
    ]


def _driver(run_dir: Path, manager: Any, engines: list[Any], trainer: DrillTrainer, faults: Path) -> Driver:
    cfg = DriverConfig(
        mode="async",
        max_staleness=1,
        concurrency=3,
        sft=SFTConfig(steps=0, tasks=1),
        grpo=GRPOConfig(rounds=ROUNDS, groups_per_round=GROUPS, updates_per_round=1, reference_model=False),
        heldout=HeldoutConfig(episodes_per_task=1, before=False),
        resume=True,  # a first run finds no checkpoint and starts afresh
    )
    job = JobConfig(
        driver=cfg,
        policy=scripted_policy(generate_timeout_s=10.0),
        sampler=SamplerConfig(group_size=ATTEMPTS),
        env=fake_manager_config(str(faults)),
        run_dir=str(run_dir),
        wandb_mode="disabled",
    )
    tasks = [fake_task(f"t{i}") for i in range(6)]
    roles = Roles(manager=manager, engines=engines, trainer=trainer, task_options=ROLLOUT_TASK, bucket_mb=1)  # type: ignore[arg-type]
    return Driver(job, TaskSplit(train=tasks, heldout=[]), roles)


def _check_the_record(run_dir: Path, versions: list[int]) -> None:
    """Every round stored once, with a full set of scored episodes; versions one apart."""
    store = run_dir / "trajectories" / "rl"
    rounds = sorted(p.name for p in store.glob("round-*"))
    assert rounds == [f"round-{r:04d}" for r in range(ROUNDS)]
    ids: list[str] = []
    for name in rounds:
        trajs = list(load_trajectories(store / name))
        assert len(trajs) == GROUPS * ATTEMPTS and not any(t.infra_failed for t in trajs), name
        ids += [t.episode_id for t in trajs]
    ids += [t.episode_id for p in store.glob("stale-*") for t in load_trajectories(p)]
    assert len(ids) == len(set(ids))
    assert versions == list(range(versions[0], versions[0] + len(versions))), versions


async def test_an_env_actor_dying_mid_update_costs_no_episode(fake_env, ray_local, tmp_path):
    make, faults = fake_env
    manager = make(delay_s=0.05)
    killed: list[int] = []

    def kill_a_busy_env(n: int) -> None:  # inside the first update, while the pool rolls out the next groups
        if n != 1:
            return
        busy = [i for i in ray_local.get(manager.instances.remote()) if i["leased"] and i["pid"]]
        assert busy, "no env was busy during the update: the pool drained"
        os.kill(busy[0]["pid"], signal.SIGKILL)
        killed.append(busy[0]["pid"])

    engines = _engines(ray_local, 1)
    d = _driver(tmp_path / "run", manager, engines, DrillTrainer(kill_a_busy_env), faults)
    report = await d.run()
    assert killed and report["rounds"] == ROUNDS
    _check_the_record(tmp_path / "run", [h["version"] for h in report["history"] if h["sequences"]])
    assert (await manager.metrics.remote())["counters"]["replaced"] >= 1
    for e in engines:
        ray_local.kill(e)


@pytest.mark.parametrize("dies", ["trainer", "engine"])
async def test_the_trainer_or_an_engine_dying_mid_update_resumes_without_a_gap_or_a_repeat(
    fake_env, ray_local, tmp_path, dies
):
    make, faults = fake_env
    manager = make()
    engines = _engines(ray_local, 2)

    def die(n: int) -> None:  # in the second update: a checkpoint of an RL round is on disk by then
        if n != 2:
            return
        if dies == "trainer":
            raise InfraError("trainer rank 0 died (drill)")
        ray_local.kill(engines[0])  # its in-flight requests fail over to engine 1; the publish finds it gone

    run = tmp_path / "run"
    first = _driver(run, manager, engines, DrillTrainer(die), faults)
    # an infrastructure failure, typed: the trainer's own, or the publish that found the engine gone
    with pytest.raises(
        InfraError, match="died" if dies == "trainer" else r"weight sync to version \d+ failed"
    ):
        await first.run()
    before = json.loads(
        (run / "checkpoints" / (run / "checkpoints" / "latest").read_text() / "state.json").read_text()
    )
    done_rounds = before["round"]
    assert 1 <= done_rounds < ROUNDS

    fresh = _engines(ray_local, 2)
    second = _driver(run, manager, fresh, DrillTrainer(), faults)
    report = await second.run()
    history = report["history"]
    assert [h["round"] for h in history] == list(range(ROUNDS))  # the resumed rounds follow the checkpoint's
    _check_the_record(run, [h["version"] for h in history if h["sequences"]])
    assert history[done_rounds]["version"] >= before["version"]  # it went on from the checkpoint's weights
    for e in [*engines, *fresh]:
        ray_local.kill(e)
