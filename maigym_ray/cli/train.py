"""``python -m maigym_ray.cli.train``: the main job. A held-out eval, SFT warm-up on golden demonstrations, a
held-out eval, GRPO rounds, a held-out eval, and a report (``report.json`` with ``heldout_success_before``,
``heldout_success_sft``, ``heldout_success_rl``, ``rounds``, ``seconds``, plus PNG plots) in the run directory.

The config is built here (Hydra → dataclasses) and the driver actor gets built objects: task lists and
dataclass configs. ``driver.resume=true output_dir=RUN`` continues an interrupted run from its last checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.cli.eval import load_tasks
from maigym_ray.cli.schema import TrainConfig, register
from maigym_ray.config import validate_manager_config
from maigym_ray.errors import ConfigError

register()


def train(cfg: TrainConfig, run_dir: Path) -> dict[str, Any]:
    """Runs the training job of ``cfg`` in ``run_dir``; returns the report."""
    import ray

    from maigym_ray.cluster import init_ray
    from maigym_ray.rl.driver import Driver

    validate_manager_config(cfg.env)
    if cfg.policy.kind != "engine":
        raise ConfigError(f"training needs policy.kind=engine (got {cfg.policy.kind!r})")
    if cfg.tasks.split:
        raise ConfigError("tasks.split must be empty for training: set train_split / heldout_split instead")
    started_here = not ray.is_initialized()
    pool = load_tasks(cfg.tasks, run_dir, cfg.ray)
    # Only tasks that some configured pool can run: a desktop task needs a desktop pool (as in eval).
    platforms = {p.platform for p in cfg.env.pools.values()}
    runnable = [t for t in pool if platforms & set(t.platforms)]
    train_tasks = [t for t in runnable if t.split == cfg.train_split]
    test_tasks = [t for t in runnable if t.split == cfg.heldout_split]
    if not train_tasks or not test_tasks:
        raise ConfigError(
            f"the pool has {len(train_tasks)} {cfg.train_split!r} and {len(test_tasks)} {cfg.heldout_split!r} "
            "tasks; training needs both"
        )
    init_ray(cfg.ray)
    try:
        driver = (
            ray.remote(Driver)
            .options(num_cpus=0, max_concurrency=8)
            .remote(
                cfg.driver,
                cfg.policy,
                cfg.trainer,
                cfg.sampler,
                cfg.env,
                train_tasks,
                test_tasks,
                str(run_dir),
                cfg.wandb.mode,
                cfg.wandb.project,
            )
        )
        return ray.get(driver.run.remote())
    finally:
        if started_here:  # a Hydra multirun starts the next job in this process
            ray.shutdown()


@hydra.main(config_path="../../conf", config_name="train", version_base="1.3")
def main(dcfg: DictConfig) -> None:
    """Hydra entry point."""
    cfg: TrainConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
    run_dir = Path(cfg.output_dir or hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    report = train(cfg, run_dir)
    summary = {
        k: report.get(k) for k in ("heldout_success_before", "heldout_success_sft", "heldout_success_rl")
    }
    print(json.dumps({**summary, "rounds": report["rounds"], "seconds": round(report["seconds"], 1)}))
    print(f"report: {run_dir / 'report.json'}")


if __name__ == "__main__":
    main()
