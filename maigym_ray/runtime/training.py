"""Training as a session: the synthesis stage, the task split, the roles (envs, engines, trainer group) placed by
the topology, and the driver actor that runs the job over them (rl/driver.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from maigym_ray.config import validate_manager_config
from maigym_ray.errors import ConfigError
from maigym_ray.rl.driver_config import JobConfig, TaskSplit
from maigym_ray.rl.roles import Roles
from maigym_ray.rollout import policy_kind
from maigym_ray.runtime.pools import env_for_pool, load_tasks, synthesis_stage
from maigym_ray.runtime.schema import TrainConfig


def train(cfg: TrainConfig, run_dir: Path) -> dict[str, Any]:
    """Runs the training job of ``cfg`` in ``run_dir``; returns the report."""
    from maigym_ray.runtime.session import Session

    cfg = replace(cfg, env=env_for_pool(cfg.env, cfg.tasks.pool))  # a suite's tasks run on its backend kind
    validate_manager_config(cfg.env)
    if not policy_kind(cfg.policy.kind).engines:
        raise ConfigError(
            f"training needs a policy kind that runs on engines, such as policy.kind=engine (got {cfg.policy.kind!r})"
        )
    if cfg.tasks.split:
        raise ConfigError("tasks.split must be empty for training: set train_split / heldout_split instead")
    from maigym_ray.rollout import check_model_settings

    check_model_settings(cfg.policy)  # the chat template and the context length, before anything starts
    session = Session(cfg.ray, cfg.env, cfg.policy, cfg.topology, trains=True)  # impossible topology: here
    session.init_ray()  # before synthesis, which would otherwise start a Ray this session does not own
    pool = load_tasks(synthesis_stage(cfg.tasks, run_dir, cfg.ray, cfg.topology))
    # Only tasks that some configured pool can run: a desktop task needs a desktop pool (as in eval).
    platforms = {p.platform for p in cfg.env.pools.values()}
    runnable = [t for t in pool if platforms & set(t.platforms)]
    train_tasks = [t for t in runnable if t.split == cfg.train_split]
    test_tasks = [t for t in runnable if t.split == cfg.heldout_split]
    # A novel-apps pool labels the novel families' training instances "rl" (runtime/pools.py).
    rl_split = cfg.rl_split or ("rl" if cfg.tasks.novel_families else cfg.train_split)
    rl_tasks = [t for t in runnable if t.split == rl_split]
    if not rl_tasks:
        raise ConfigError(f"the pool has no {rl_split!r} tasks for RL (rl_split)")
    if not train_tasks or not test_tasks:
        raise ConfigError(
            f"the pool has {len(train_tasks)} {cfg.train_split!r} and {len(test_tasks)} {cfg.heldout_split!r} "
            "tasks; training needs both"
        )
    try:
        tasks = TaskSplit(train=train_tasks, heldout=test_tasks, rl=rl_tasks)
        return asyncio.run(_run(session, cfg, tasks, run_dir))
    finally:
        session.shutdown_ray()


async def start_roles(session: Any, cfg: TrainConfig, tasks: list) -> Roles:
    """Brings up the roles the driver runs over (the EnvManager warm with ``tasks``, the engines, the trainer
    group); returns them as the driver's ``roles``."""
    from maigym_ray.policy.engine import resolve_model

    manager, engines = await session.start(tasks)
    trainer = await asyncio.to_thread(
        session.start_trainer, resolve_model(cfg.policy.engine.model), cfg.trainer, cfg.driver.seed
    )
    sync = cfg.topology.weight_sync
    return Roles(
        manager=manager,
        engines=list(engines),
        trainer=trainer,
        task_options=session.placement.rollout_task(),
        sync_backend=sync.backend,
        bucket_mb=sync.bucket_mb,
        colocated=cfg.topology.mode == "colocated",
    )


def job_config(cfg: TrainConfig, run_dir: Path) -> JobConfig:
    """What the driver reads of the run's config ``cfg``, writing to ``run_dir``."""
    return JobConfig(
        driver=cfg.driver,
        policy=cfg.policy,
        trainer=cfg.trainer,
        sampler=cfg.sampler,
        env=cfg.env,
        run_dir=str(run_dir),
        wandb_mode=cfg.wandb.mode,
        wandb_project=cfg.wandb.project,
    )


async def _run(session: Any, cfg: TrainConfig, tasks: TaskSplit, run_dir: Path) -> Any:
    import ray

    from maigym_ray.rl.driver import Driver

    try:
        extra = [t for t in tasks.rl or [] if t.split != cfg.train_split]
        roles = await start_roles(session, cfg, [*tasks.train, *extra, *tasks.heldout])
        options = session.driver_options()
        driver = ray.remote(Driver).options(**options).remote(job_config(cfg, run_dir), tasks, roles)
        return await driver.run.remote()
    finally:
        await session.stop()
