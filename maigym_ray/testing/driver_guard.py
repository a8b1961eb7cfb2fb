"""The learning guard on the training job's own loop: rl/driver.py, with every role it drives live.

maigym_ray/testing/learning.py (the CI guard of tests/e2e/test_learning.py) runs the round's pieces in one
process, with an in-process engine. This module runs the real thing on the same ``fake-pick`` family: a local
Ray, the EnvManager over fake-backend instances, a vLLM engine actor on the tiny text model, the trainer group,
and :class:`~maigym_ray.rl.driver.Driver` itself (its held-out evals, SFT warm-up, adaptive sampler, step
penalties, format advantages, zero-variance skip, update and weight broadcast with its version check). Only the
driver object lives in the caller's process rather than in an actor, so that a test can break one piece of it
(the advantage sign, the weight sync) and see what the run then does.

:meth:`DriverGuard.healthy` runs the whole job and keeps its post-SFT checkpoint; :meth:`DriverGuard.rerun_rl`
resumes a copy of that checkpoint (the job's own ``driver.resume``) with other RL settings, so every arm starts
from the same SFT weights and pays for SFT once.

Not yet the CI guard: on this family the real loop has not shown the twin's lift within a CI budget
(docs/experiments/2026-12-04-driver-guard.md).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import Any

from maigym_ray.rl.roles import Roles
from maigym_ray.testing.learning import HELDOUT_SEED0, LABELS, PICK_SYSTEM, fake_pick_task
from maigym_ray.types import TaskSpec


@dataclass
class GuardFamily:
    """The ``fake-pick`` instances of a guard run."""

    #: training instances 0..N-1: SFT demonstrates the first ``driver.sft.tasks`` of them, RL samples them all.
    train: int = 256
    #: held-out instances (seeds from HELDOUT_SEED0 on).
    heldout: int = 64
    #: buttons on each screen, and how their ids are drawn (:func:`fake_pick_task`).
    buttons: int = 3
    ids: str = "per_label"
    #: labels drawn from the first N of LABELS.
    labels: int = len(LABELS)

    def tasks(self) -> tuple[list[TaskSpec], list[TaskSpec]]:
        """(training, held-out) instances."""

        def task(seed: int) -> TaskSpec:
            return fake_pick_task(seed, self.buttons, self.ids, labels=self.labels)

        return [task(i) for i in range(self.train)], [task(HELDOUT_SEED0 + i) for i in range(self.heldout)]


def guard_config(**sections: Any) -> Any:
    """The guard's TrainConfig: the job's own schema (runtime/schema.py) with the fake backend, the tiny text
    model on vLLM, and the best recipe measured so far (the in-process guard's settings with 200 SFT steps on
    64 demonstrations: held-out 0.20 -> 0.28 in 250 s on two cores, short of a 0.10 margin at that cost).
    ``sections`` replace fields of a section, e.g. ``trainer={"lr": 0.0}`` or ``driver={"grpo": {"rounds": 3}}`` (:func:`overridden`)."""
    from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, RayConfig
    from maigym_ray.generation import SamplingConfig
    from maigym_ray.harness.config import PromptConfig
    from maigym_ray.policy.config import EngineConfig
    from maigym_ray.rl.driver_config import DriverConfig, GRPOConfig, HeldoutConfig, SFTConfig
    from maigym_ray.rl.sampler import SamplerConfig
    from maigym_ray.rl.trainer import TrainerConfig
    from maigym_ray.runtime.schema import TrainConfig, WandbConfig

    cfg = TrainConfig(
        ray=RayConfig(num_cpus=2),
        env=EnvManagerConfig(
            pools={"web": PoolConfig(backend="fake", target_size=8, max_size=8)},
            apps=[],
            health_interval_s=30.0,
        ),
        policy=PolicyConfig(
            kind="engine",
            engine=EngineConfig(model="tiny-text", max_model_len=1024),
            # the family's own short system turn, as the in-process guard's: the harness's built-in turn slows the
            # tiny model's label-to-id learning several times (docs/experiments/2026-12-02-learning-guard.md)
            prompt=PromptConfig(repeat_task=True, actions=["click", "terminate"], system=PICK_SYSTEM),
            sampling=SamplingConfig(max_tokens=16),
        ),
        trainer=TrainerConfig(lr=5e-4, aggregation="seq_mean_token_mean"),
        sampler=SamplerConfig(group_size=12),
        driver=DriverConfig(
            sft=SFTConfig(tasks=64, steps=200, lr=3e-3, batch_size=16, warmup_steps=5),
            grpo=GRPOConfig(
                rounds=15, groups_per_round=8, updates_per_round=1, epochs=2, reference_model=False
            ),
            heldout=HeldoutConfig(episodes_per_task=1, temperature=0.0),
            concurrency=8,
            keep_checkpoints=100,  # the post-SFT checkpoint must outlive the rounds: the other arms resume it
        ),
        wandb=WandbConfig(mode="disabled"),
        name="learning-guard",
    )
    return overridden(cfg, sections)


def overridden(cfg: Any, fields: dict[str, Any]) -> Any:
    """``cfg`` (a dataclass) with ``fields`` replaced; a dict value replaces fields of that sub-config, so
    ``{"driver": {"grpo": {"rounds": 3}}}`` changes one field three levels down."""
    changes = {}
    for name, value in fields.items():
        current = getattr(cfg, name)
        changes[name] = (
            overridden(current, value) if is_dataclass(current) and isinstance(value, dict) else value
        )
    return replace(cfg, **changes)


@dataclass
class DriverGuard:
    """One session of guard runs in ``root`` (see the module docstring): bring it up with :meth:`start`, run
    :meth:`healthy` once, then any number of :meth:`rerun_rl`, and :meth:`stop`."""

    root: Path
    cfg: Any = field(default_factory=guard_config)
    family: GuardFamily = field(default_factory=GuardFamily)

    def __post_init__(self) -> None:
        self.train_tasks, self.test_tasks = self.family.tasks()
        self.session: Any = None
        self.roles = Roles()

    def start(self) -> None:
        """Ray, the EnvManager, the engine and the trainer group, as the training job brings them up."""
        from maigym_ray.runtime.session import Session
        from maigym_ray.runtime.training import start_roles

        c = self.cfg
        self.session = Session(c.ray, c.env, c.policy, c.topology, trains=True)
        self.session.init_ray()
        self.roles = asyncio.run(start_roles(self.session, c, [*self.train_tasks, *self.test_tasks]))

    def stop(self) -> None:
        """Tears the roles down and stops the Ray this guard started."""
        if self.session is not None:
            asyncio.run(self.session.stop())
            self.session.shutdown_ray()
            self.session = None

    def _driver(self, cfg: Any, run_dir: Path) -> Any:
        from maigym_ray.rl.driver import Driver
        from maigym_ray.rl.driver_config import TaskSplit
        from maigym_ray.runtime.training import job_config

        tasks = TaskSplit(train=self.train_tasks, heldout=self.test_tasks)
        return Driver(job_config(cfg, run_dir), tasks, self.roles)

    def healthy(self) -> dict[str, Any]:
        """The whole job (before, SFT, the GRPO rounds, after) in ``root/healthy``; returns its report."""
        return asyncio.run(self._driver(self.cfg, self.root / "healthy").run())

    def rerun_rl(self, name: str, **sections: Any) -> dict[str, Any]:
        """The GRPO rounds and the last eval again, from the healthy run's post-SFT checkpoint, in
        ``root/name`` with ``sections`` applied (as in :func:`guard_config`); returns the report."""
        run_dir = self.root / name
        fork_after_sft(self.root / "healthy", run_dir)
        cfg = overridden(self.cfg, {**sections, "driver": {**sections.get("driver", {}), "resume": True}})
        return asyncio.run(self._driver(cfg, run_dir).run())


def fork_after_sft(src: Path, dst: Path) -> Path:
    """A new run directory ``dst`` whose only checkpoint is ``src``'s post-SFT one (phase "sft", round 0), so
    that ``driver.resume`` there continues with the GRPO rounds; returns that checkpoint's copy."""
    root = src / "checkpoints"
    found = []
    for ckpt in sorted(root.glob("ckpt-*")):
        state = json.loads((ckpt / "state.json").read_text())
        if state["phase"] == "sft" and state["round"] == 0:
            found.append(ckpt)
    if not found:
        raise FileNotFoundError(f"{root} keeps no post-SFT checkpoint (driver.keep_checkpoints too small?)")
    if dst.exists():
        shutil.rmtree(dst)
    (dst / "checkpoints").mkdir(parents=True)
    copy = dst / "checkpoints" / found[-1].name
    shutil.copytree(found[-1], copy)
    (dst / "checkpoints" / "latest").write_text(copy.name)
    return copy
