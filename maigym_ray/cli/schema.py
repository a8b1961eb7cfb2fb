"""Top-level config schemas of the entry points, registered with Hydra's ConfigStore.

Sub-configs (env manager, pools, Ray) live in :mod:`maigym_ray.config`. Registering the schemas makes Hydra
validate every YAML in ``conf/`` against them: an unknown key is an error, and so is a wrong type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore

from maigym_ray.config import EnvManagerConfig, PolicyConfig, RayConfig
from maigym_ray.rl.driver import DriverConfig
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.rl.trainer import TrainerConfig


@dataclass
class TasksConfig:
    """Which tasks to run."""

    #: "builtin" (the hand-written tasks shipped with the apps), "curriculum" (the debug training curriculum,
    #: see tasks/curriculum.py) or a .parquet / .jsonl file or folder.
    pool: str = "builtin"
    #: keep only this split ("" = all).
    split: str = ""
    #: keep only tasks on these apps ([] = all).
    apps: list[str] = field(default_factory=list)
    #: at most this many tasks (0 = all), taken in pool order.
    limit: int = 0


@dataclass
class WandbConfig:
    """Weights & Biases logging (offline by default: no network needed)."""

    #: "offline", "online" or "disabled".
    mode: str = "offline"
    #: the wandb project.
    project: str = "maigym_ray"


@dataclass
class EvalConfig:
    """``python -m maigym_ray.cli.eval``: run a task pool through the harness and score it."""

    ray: RayConfig = field(default_factory=RayConfig)
    env: EnvManagerConfig = field(default_factory=EnvManagerConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    #: episodes per task.
    episodes_per_task: int = 1
    #: environments leased at once (episodes run in parallel, one per env).
    concurrency: int = 4
    #: how many times an episode that hit an infrastructure failure is retried on a fresh instance.
    infra_retries: int = 2
    #: where results go; "" = Hydra's run directory.
    output_dir: str = ""
    #: a name for the run (wandb run name, report title).
    name: str = "eval"


@dataclass
class CollectConfig(EvalConfig):
    """``python -m maigym_ray.cli.collect``: the eval run, keeping every trajectory as Parquet."""

    #: keep each step's screenshot in the stored trajectories (large).
    keep_screenshots: bool = False
    #: trajectories per Parquet part file.
    flush_every: int = 64
    name: str = "collect"


def _engine_policy() -> PolicyConfig:
    return PolicyConfig(kind="engine")


def _curriculum() -> TasksConfig:
    return TasksConfig(pool="curriculum")


@dataclass
class TrainConfig:
    """``python -m maigym_ray.cli.train``: held-out eval, SFT warm-up, GRPO rounds, held-out evals, report."""

    ray: RayConfig = field(default_factory=RayConfig)
    env: EnvManagerConfig = field(default_factory=EnvManagerConfig)
    #: the task pool; its ``split`` must stay "" (train_split and heldout_split pick the two halves).
    tasks: TasksConfig = field(default_factory=_curriculum)
    #: the policy (kind "engine": vLLM engine actors that the driver starts and updates).
    policy: PolicyConfig = field(default_factory=_engine_policy)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    driver: DriverConfig = field(default_factory=DriverConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    #: the split trained on, and the held-out split evaluated (never trained on).
    train_split: str = "train"
    heldout_split: str = "test"
    #: the run directory; "" = Hydra's run directory. ``driver.resume=true`` continues the run found there.
    output_dir: str = ""
    #: a name for the run (wandb run name, report title).
    name: str = "train"


def register() -> None:
    """Registers the schemas so ``conf/*.yaml`` can name them in their defaults lists."""
    cs = ConfigStore.instance()
    cs.store(name="eval_schema", node=EvalConfig)
    cs.store(name="collect_schema", node=CollectConfig)
    cs.store(name="train_schema", node=TrainConfig)
