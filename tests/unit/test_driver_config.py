"""The driver's typed inputs (rl/driver_config.py): the job's settings and the tasks by role, each checked when
built, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.rl import driver as driver_module
from maigym_ray.rl.driver import Driver
from maigym_ray.rl.driver_config import DriverConfig, JobConfig, TaskSplit
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.testing import fake_task

pytestmark = pytest.mark.unit


def test_rl_samples_the_training_tasks_unless_told_otherwise() -> None:
    train, novel = [fake_task("a"), fake_task("b")], [fake_task("n")]
    assert TaskSplit(train=train, heldout=[]).rl == train
    assert TaskSplit(train=train, heldout=[], rl=novel).rl == novel


@pytest.mark.parametrize("role", ["train", "rl"])
def test_a_held_out_task_never_enters_training(role: str) -> None:
    held = [fake_task("h0"), fake_task("h1")]
    split = {"train": [fake_task("a")], "rl": [fake_task("b")], role: [fake_task("a"), fake_task("h1")]}
    with pytest.raises(ConfigError, match=r"never enter training: \['h1'\]"):
        TaskSplit(train=split["train"], heldout=held, rl=split["rl"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"run_dir": ""}, "run directory"), ({"run_dir": "r", "wandb_mode": "offlne"}, "wandb.mode='offlne'")],
)
def test_a_job_without_a_run_dir_or_with_an_unknown_wandb_mode_is_refused(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        JobConfig(**fields)


def test_the_driver_reads_its_inputs(tmp_path: Path) -> None:
    job = JobConfig(
        driver=DriverConfig(seed=3), sampler=SamplerConfig(group_size=5), run_dir=str(tmp_path / "run")
    )
    tasks = TaskSplit(train=[fake_task("a")], heldout=[fake_task("h")], rl=[fake_task("n0"), fake_task("n1")])
    d = Driver(job, tasks)
    assert d.cfg is job.driver and d.run_dir == tmp_path / "run" and d.wandb_mode == "offline"
    assert sorted(d.tasks) == ["a", "h", "n0", "n1"]
    # the sampler plans over the RL tasks only, with the job's group size
    assert sorted(d.sampler.plan(4)) == [("n0", 5), ("n1", 5)]
    # the old import path of the driver's settings still works
    assert driver_module.DriverConfig is DriverConfig
