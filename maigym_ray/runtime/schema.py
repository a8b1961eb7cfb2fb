"""Top-level config schemas of the entry points, registered with Hydra's ConfigStore.

Sub-configs (env manager, pools, Ray) live in :mod:`maigym_ray.config`. Registering the schemas makes Hydra
validate every YAML in ``conf/`` against them: an unknown key is an error, and so is a wrong type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from maigym_ray.config import (
    AndroidBackendConfig,
    DesktopBackendConfig,
    EnvManagerConfig,
    PolicyConfig,
    RayConfig,
    WebBackendConfig,
)
from maigym_ray.errors import ConfigError
from maigym_ray.generation import SamplingConfig
from maigym_ray.policy.config import OpenAIConfig
from maigym_ray.rl.driver_config import DriverConfig
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.rl.strategies import DeepSpeedConfig
from maigym_ray.rl.trainer import TrainerConfig
from maigym_ray.runtime.topology import TopologyConfig


@dataclass
class TasksConfig:
    """Which tasks to run."""

    #: "builtin" (the hand-written tasks shipped with the apps), "curriculum" (the debug training curriculum,
    #: see tasks/curriculum.py), a .parquet / .jsonl file or folder, or "synth:<template>[,<template>...]"
    #: ("synth:all" = the default templates; quote it, tasks.pool='synth:a,b', as Hydra splits a bare comma):
    #: synthesised and validated live at the start of the run, into
    #: <run dir>/pool/ (a resumed run reuses it).
    pool: str = "builtin"
    #: worlds synthesised for a "synth:" pool (the curriculum template needs only one).
    synth_worlds: int = 1
    #: training instances per family of a "families:<name>[,<name>...]" pool (tasks/families.py).
    family_train: int = 256
    #: held-out instances per family of a "families:" pool (seeds disjoint from the training ones).
    family_heldout: int = 16
    #: name the target item's (per-instance) id in each family instruction (tasks/families.py, cite_id).
    family_cite_ids: bool = False
    #: "random" (new item ids every instance) or "per_name" (an item's id follows from its name), see
    #: tasks/families.py.
    family_ids: str = "random"
    #: families whose training instances are labelled "rl" (RL only, no demonstrations) and that alone supply
    #: the held-out instances: the novel-apps experiment (conf/experiment/novel_apps.yaml). [] = none.
    novel_families: list[str] = field(default_factory=list)
    #: keep only this split ("" = all).
    split: str = ""
    #: keep only tasks on these apps ([] = all).
    apps: list[str] = field(default_factory=list)
    #: keep only tasks that run on one of these platforms (web, mobile_web, android, desktop; [] = every
    #: platform a configured pool serves). Tasks on platforms no pool serves are left out, and said so.
    platforms: list[str] = field(default_factory=list)
    #: at most this many tasks (0 = all), taken in pool order.
    limit: int = 0


@dataclass
class WandbConfig:
    """Weights & Biases logging (offline by default: no network needed)."""

    #: "offline", "online" or "disabled".
    mode: str = "offline"
    #: the wandb project.
    project: str = "maigym_ray"


def _no_pools() -> EnvManagerConfig:
    # No default pool beside the backends group's: `backends=desktop` must mean desktops only, not desktops
    # plus a web pool that quietly runs the web tasks (the group's files each define their pools in full).
    return EnvManagerConfig(pools={})


@dataclass
class EvalConfig:
    """``python -m maigym_ray.cli.eval``: run a task pool through the harness and score it."""

    ray: RayConfig = field(default_factory=RayConfig)
    #: where each role runs and what it takes (conf/topology/; local by default).
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    #: the environments; the ``backends`` group (conf/backends/) supplies the pools.
    env: EnvManagerConfig = field(default_factory=_no_pools)
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
    # The curriculum template run through synthesis: planned goldens, live validation, a Parquet pool.
    return TasksConfig(pool="synth:curriculum")


@dataclass
class TrainConfig:
    """``python -m maigym_ray.cli.train``: held-out eval, SFT warm-up, GRPO rounds, held-out evals, report."""

    ray: RayConfig = field(default_factory=RayConfig)
    #: where each role runs and what it takes (conf/topology/; local by default).
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    #: the environments; the ``backends`` group (conf/backends/) supplies the pools.
    env: EnvManagerConfig = field(default_factory=_no_pools)
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
    #: the split RL trains on, when it is not the SFT split ("" = train_split, or "rl" when
    #: tasks.novel_families is set: the novel-apps experiment).
    rl_split: str = ""
    #: the run directory; "" = Hydra's run directory. ``driver.resume=true`` continues the run found there.
    output_dir: str = ""
    #: a name for the run (wandb run name, report title).
    name: str = "train"


@dataclass
class LLMSynthConfig:
    """Optional LLM-assisted synthesis through any OpenAI-compatible endpoint (off when ``base_url`` is "")."""

    #: the endpoint, e.g. "http://127.0.0.1:8000/v1"; "" turns LLM assistance off.
    base_url: str = ""
    #: the model name the endpoint serves.
    model: str = ""
    #: the environment variable holding the API key ("" = no key).
    api_key_env: str = "OPENAI_API_KEY"
    #: instruction paraphrases asked for per task (each is validated like any task before it enters the pool).
    paraphrases: int = 1
    #: tasks whose instruction is paraphrased (the first N validated train tasks).
    max_tasks: int = 50
    #: whole new tasks (instruction, declarative checks, plan: data, never code) asked for per world, for the first
    #: ``task_worlds`` worlds (0 = none); each is pre-checked and validated live like any task.
    tasks_per_world: int = 0
    task_worlds: int = 3
    #: seconds per request.
    timeout_s: float = 60.0


def _writer_policy() -> PolicyConfig:
    # a spec is a page of JSON: the policy default's 64 tokens would cut every draft short, and 2,048 tokens
    # take minutes on a loaded CPU, past the 120 s after which the router counts an engine as hung
    return PolicyConfig(
        kind="engine",
        sampling=SamplingConfig(temperature=0.7, max_tokens=2048),
        generate_timeout_s=1800.0,
    )


@dataclass
class SpecWriterConfig:
    """The LLM spec writer (synth/spec_writer.py): a model drafts app specs from one-line descriptions; a draft is
    kept only through the schema, reachability, task-derivation and live-validation gates."""

    #: one-line descriptions of the apps to draft ("a plant watering log"); [] = off: ``cli.synth`` then
    #: synthesises a task pool as usual.
    descriptions: list[str] = field(default_factory=list)
    #: drafts asked for per description.
    attempts: int = 1
    #: drafts asked for at once (an engine batches them).
    concurrency: int = 4
    #: derived tasks per draft validated live (the kinds in turn); a draft with none valid is rejected.
    max_tasks: int = 8
    #: the model that writes: policy.kind engine (the vLLM engine actors this run starts, e.g.
    #: ``policy.engine.model=smollm2-135m``) or openai (a server); ``policy.sampling`` bounds a draft's length.
    policy: PolicyConfig = field(default_factory=_writer_policy)

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise ConfigError(f"spec_writer.attempts must be a whole number >= 1, got {self.attempts!r}")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ConfigError(
                f"spec_writer.concurrency must be a whole number >= 1, got {self.concurrency!r}"
            )
        if not isinstance(self.max_tasks, int) or self.max_tasks < 1:
            raise ConfigError(f"spec_writer.max_tasks must be a whole number >= 1, got {self.max_tasks!r}")
        bad = [d for d in self.descriptions if not isinstance(d, str) or not d.strip()]
        if bad:
            raise ConfigError(f"spec_writer.descriptions: every description is a non-empty line, got {bad!r}")


def _validation_env() -> EnvManagerConfig:
    # Validation only needs the state and the element ids: no screenshots (faster steps, less memory); two
    # resets per task would recycle instances every 25 tasks at the default, so recycle far less often.
    # Agent episodes keep the default reset (a fresh context), which also clears what a page stored.
    cfg = EnvManagerConfig()
    # reload: the app state lives in the app server; no new renderer per reset
    cfg.pools["web"].options.update(screenshot=False, reset="reload")
    cfg.pools["web"].recycle_after = 1000
    return cfg


@dataclass
class SynthConfig:
    """``python -m maigym_ray.cli.synth``: worlds -> templates -> planned goldens -> live validation -> pool."""

    ray: RayConfig = field(default_factory=RayConfig)
    #: where the validation envs run (conf/topology/; local by default).
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    #: the environments validation runs on (web pool, screenshots off).
    env: EnvManagerConfig = field(default_factory=_validation_env)
    llm: LLMSynthConfig = field(default_factory=LLMSynthConfig)
    #: with descriptions set, ``cli.synth`` drafts app specs with a model instead of synthesising tasks.
    spec_writer: SpecWriterConfig = field(default_factory=SpecWriterConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    #: how many worlds, and the seed of the first (world k has seed first_world + k).
    worlds: int = 50
    first_world: int = 0
    #: templates to use ([] = all; see maigym_ray/synth/templates.py and cross_app.py).
    templates: list[str] = field(default_factory=list)
    #: every test_every-th world's tasks on the training apps are the ``test`` split (0 = none).
    test_every: int = 5
    #: validate on live instances (false: the in-process pre-check only; the pool is marked unvalidated).
    validate: bool = True
    #: environments validating at once.
    concurrency: int = 4
    #: retries of a task that hit an infrastructure failure (on a fresh instance).
    infra_retries: int = 1
    #: where the pool goes; "" = Hydra's run directory.
    output_dir: str = ""
    #: a name for the run.
    name: str = "synth"


@dataclass
class DiagnoseConfig:
    """``python -m maigym_ray.cli.diagnose``: group an eval run's failures, synthesise more for the weakest."""

    #: the eval run's results.parquet.
    results: str = ""
    #: the pool the eval ran (a synthesised pool.parquet).
    pool: str = ""
    #: how many of the weakest (app, template, tier) groups get new tasks.
    weakest: int = 3
    #: new worlds synthesised for them (their seeds follow the pool's highest world seed).
    worlds: int = 5
    #: groups with fewer episodes than this are not ranked.
    min_episodes: int = 2
    #: how the new tasks are made and validated (Ray, the validation env, ``validate``, ``concurrency``,
    #: ``test_every``); its ``worlds`` and ``templates`` are set by the diagnosis.
    synth: SynthConfig = field(default_factory=SynthConfig)
    #: where the new pool version goes; "" = next to ``pool`` (pool_v<N+1>.parquet).
    output: str = ""


#: The settings classes of the package's backend kinds, as Hydra group ``backend_options``: web (kinds web and
#: miniwob), android, desktop (kinds desktop and osworld).
BACKEND_OPTIONS: dict[str, type] = {
    "web": WebBackendConfig,
    "android": AndroidBackendConfig,
    "desktop": DesktopBackendConfig,
}


#: The package's policy kinds, as Hydra group ``policy`` (``policy=openai``): each option sets ``policy.kind``
#: and, for a kind with settings (``PolicyKind.options``), every one of them under ``policy.options``.
POLICY_OPTIONS: dict[str, type | None] = {
    "golden": None,
    "random": None,
    "engine": None,
    "openai": OpenAIConfig,
    "demo": None,
}


#: The package's trainer strategies, as Hydra group ``trainer_strategy`` (``trainer_strategy=deepspeed``, into
#: ``topology.trainer``): each option sets the strategy and every one of its settings.
STRATEGY_OPTIONS: dict[str, type | None] = {"torch": None, "deepspeed": DeepSpeedConfig}


def register() -> None:
    """Registers the schemas so ``conf/*.yaml`` can name them in their defaults lists."""
    # conf/*.yaml set hydra.run.dir to ``${maigym_run_dir:${output_dir},<Hydra's dated default>}``, so with
    # output_dir set Hydra's own files (.hydra/, the log) land in the run directory with everything else.
    if not OmegaConf.has_resolver("maigym_run_dir"):
        OmegaConf.register_new_resolver("maigym_run_dir", lambda out, default: out or default)
    cs = ConfigStore.instance()
    cs.store(name="eval_schema", node=EvalConfig)
    cs.store(name="collect_schema", node=CollectConfig)
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="synth_schema", node=SynthConfig)
    cs.store(name="diagnose_schema", node=DiagnoseConfig)
    # the package's backend settings classes, which conf/backends/*.yaml put under each pool's ``options``
    # (``- /backend_options@env.pools.NAME.options: web``): the pool's options then hold every setting of its
    # kind, so ``env.pools.web.options.width=800`` overrides without a "+" and a typo is refused. They go in as
    # plain mappings of the class's defaults: a typed node would become an instance of the class, not the
    # mapping a pool's options are, and would silently drop a key forced in with "+" instead of refusing it.
    for name, cls in BACKEND_OPTIONS.items():
        cs.store(group="backend_options", name=name, node=dataclasses.asdict(cls()))
    # the same for policy kinds, as whole choices: ``policy=openai policy.options.base_url=...``
    for name, opts in POLICY_OPTIONS.items():
        node: dict = {"kind": name} | ({"options": dataclasses.asdict(opts())} if opts is not None else {})
        cs.store(group="policy", name=name, node=node)
    for name, opts in STRATEGY_OPTIONS.items():
        node = {"strategy": name} | ({"options": dataclasses.asdict(opts())} if opts is not None else {})
        cs.store(group="trainer_strategy", name=name, node=node, package="topology.trainer")
