"""What the training driver (rl/driver.py) is given: its own settings (``DriverConfig``: the SFT warm-up, the GRPO
rounds, the held-out evals), the job's settings it reads beside them (``JobConfig``), and the tasks it uses by
role (``TaskSplit``). With the live roles (rl/roles.py) these are the driver's three inputs:
``Driver(job, tasks, roles)``. ``rl.driver`` re-exports them, so its old import paths keep working.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from maigym_ray.config import EnvManagerConfig, PolicyConfig
from maigym_ray.errors import ConfigError
from maigym_ray.rl.credit import CREDITS
from maigym_ray.rl.packing import STEP_NORMALIZERS
from maigym_ray.rl.sampler import SamplerConfig
from maigym_ray.rl.schedule import SCHEDULES
from maigym_ray.rl.trainer import TrainerConfig
from maigym_ray.types import TaskSpec


@dataclass
class SFTConfig:
    """The supervised warm-up on golden demonstrations."""

    #: optimizer steps over the demonstrations (0 = no warm-up).
    steps: int = 30
    #: learning rate of the warm-up (RL uses trainer.lr).
    lr: float = 1e-3
    #: demonstrations per training task (a golden replay is deterministic, so 1 per platform suffices).
    demos_per_task: int = 1
    #: demonstrate only the first N training tasks (0 = all): a fixed demonstration set, for pools of task
    #: family instances (tasks/families.py) whose RL samples many more training instances than SFT sees.
    tasks: int = 0
    #: demonstrations per step, drawn at random (0 = all of them every step).
    batch_size: int = 16
    #: learning-rate schedule over the warm-up's steps: "cosine" (decay to 0) or "constant" (rl/schedule.py).
    schedule: str = "cosine"
    #: steps of linear learning-rate warm-up before the schedule.
    warmup_steps: int = 10

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"sft.schedule={self.schedule!r}: choose one of {SCHEDULES}")


@dataclass
class GRPOConfig:
    """GRPO rounds."""

    #: rounds of sample → roll out → update → broadcast.
    rounds: int = 10
    #: task groups per round (each gets the sampler's number of attempts).
    groups_per_round: int = 6
    #: optimizer steps per round: the round's sequences are split into this many mini-batches by episode.
    updates_per_round: int = 2
    #: passes over a round's sequences (PPO epochs): each pass takes ``updates_per_round`` steps, and the
    #: passes after the first are off-policy, held near the sampling policy by the ratio clip and the KL.
    #: Rollouts cost several times an update, so more passes get more learning out of each round.
    epochs: int = 1
    #: std-normalised group advantages (GRPO); False = mean-only (Dr.GRPO).
    normalize_std: bool = True
    #: taken off a successful episode's reward per step it took (failures keep theirs), so that among the
    #: successes of a group the shorter scores higher (rl/advantages.py ``step_penalized``). Keep it under
    #: ``1 / max_steps``: a success must always outscore a failure. The task sampler sees the unshaped reward.
    step_penalty: float = 0.0
    #: advantage taken off per step whose action did not parse, centred in each group and added after the std
    #: normalisation (rl/advantages.py ``format_advantages``): it steers towards well-formed actions without
    #: outweighing the verifier. A group whose rewards are equal still trains when its malformed steps differ.
    invalid_action_penalty: float = 0.0
    #: which steps share an episode's advantage: ``episode`` (all of them) or ``effective`` (a success's idle
    #: steps, after which the screen's elements did not change, get no positive share; rl/credit.py).
    credit: str = "episode"
    #: keep a frozen copy of the post-SFT policy as the KL reference (its KL is logged even at kl_coef 0).
    reference_model: bool = True
    #: how each step's loss is normalised (rl/packing.py STEP_NORMALIZERS): "none" (trainer.aggregation
    #: decides), "trajectory" (1/|tau|: every episode counts once) or "constant" (1/k, k =
    #: ``normalizer_steps``: every step counts alike, whatever its episode's length).
    step_normalizer: str = "none"
    #: the k of the "constant" normaliser (0: each task's own step cap, ``TaskSpec.max_steps``).
    normalizer_steps: int = 0

    def __post_init__(self) -> None:
        if self.step_normalizer not in STEP_NORMALIZERS:
            raise ConfigError(
                f"grpo.step_normalizer={self.step_normalizer!r}: choose one of {', '.join(STEP_NORMALIZERS)}"
            )
        if self.normalizer_steps < 0:
            raise ConfigError(f"grpo.normalizer_steps={self.normalizer_steps}: need >= 0")
        if self.step_penalty < 0:
            raise ConfigError(f"grpo.step_penalty={self.step_penalty}: need >= 0")
        if self.invalid_action_penalty < 0:
            raise ConfigError(f"grpo.invalid_action_penalty={self.invalid_action_penalty}: need >= 0")
        if self.credit not in CREDITS:
            raise ConfigError(f"grpo.credit={self.credit!r}: choose one of {CREDITS}")


@dataclass
class HeldoutConfig:
    """The held-out evals before training, after SFT and after RL."""

    #: episodes per held-out task.
    episodes_per_task: int = 8
    #: episodes per held-out task of the eval before training (0 = ``episodes_per_task``). A pretrained model
    #: that has not learnt the action format yet runs every episode to its step cap, so this eval is the
    #: costliest of the three, while the lift the job reports (RL against SFT) does not use it.
    before_episodes_per_task: int = 0
    #: sampling temperature of the evals (the policy's other sampling settings apply).
    temperature: float = 1.0
    #: run the eval before training (false: the report has no "before" figure). A job that only continues
    #: training, such as a round of the diagnosis loop (runtime/diagnosis_loop.py), knows it already.
    before: bool = True

    def __post_init__(self) -> None:
        if self.episodes_per_task < 1 or self.before_episodes_per_task < 0:
            raise ConfigError(
                f"heldout.episodes_per_task={self.episodes_per_task} (need >= 1), "
                f"heldout.before_episodes_per_task={self.before_episodes_per_task} (need >= 0)"
            )


@dataclass
class DriverConfig:
    """What the driver runs and how."""

    sft: SFTConfig = field(default_factory=SFTConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    heldout: HeldoutConfig = field(default_factory=HeldoutConfig)
    #: episodes run at once (one leased env each).
    concurrency: int = 4
    #: retries of an episode that hit an infrastructure failure.
    infra_retries: int = 2
    #: continue from the run directory's last checkpoint (rounds, sampler, optimizer, weights).
    resume: bool = False
    #: checkpoints kept on disk.
    keep_checkpoints: int = 2
    #: seed of the sampler, the SFT batches and torch.
    seed: int = 0
    #: "sync" (a round rolls out, then trains, then syncs) or "async" (an everlasting rollout pool feeds the
    #: trainer finished groups while it trains, and weights reach the engines between requests; docs/async-rl.md).
    #: A round is one policy update in both.
    mode: str = "sync"
    #: async: no group trains more than this many policy versions after the version that generated its first
    #: turn (rl/staleness.py). 0 is synchronous training through the asynchronous pool.
    max_staleness: int = 1
    #: async: the pool holds groups for this many times ``concurrency`` episodes (rl/group_stream.pool_lanes),
    #: so a group's finished episodes' slots go to the next groups.
    pool_oversubscription: float = 2.0

    def __post_init__(self) -> None:
        if self.mode not in DRIVER_MODES:
            raise ConfigError(f"driver.mode={self.mode!r}: choose one of {', '.join(DRIVER_MODES)}")
        if self.max_staleness < 0:
            raise ConfigError(f"driver.max_staleness={self.max_staleness}: need >= 0")
        if self.pool_oversubscription < 1:
            raise ConfigError(f"driver.pool_oversubscription={self.pool_oversubscription}: need >= 1")
        if self.concurrency < 1:
            raise ConfigError(f"driver.concurrency={self.concurrency}: need >= 1")


#: How the driver runs GRPO (DriverConfig.mode).
DRIVER_MODES = ("sync", "async")


#: The wandb modes a job may log in.
WANDB_MODES = ("offline", "online", "disabled")


@dataclass
class JobConfig:
    """The training job as the driver reads it: its own section, the sections it hands on (to the rollouts, the
    trainer and the sampler) and where the run writes. runtime/training.py fills it from the run's config."""

    #: what the driver runs and how (SFT, GRPO, held-out evals, checkpoints, seed).
    driver: DriverConfig = field(default_factory=DriverConfig)
    #: the policy the rollouts run; its history settings also pack the training sequences.
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    #: the trainer's settings the driver reads (the RL learning rate, where the old logprobs come from).
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    #: the adaptive task sampler's settings.
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    #: the environments: the platforms the pools serve, and each step's timeout.
    env: EnvManagerConfig = field(default_factory=EnvManagerConfig)
    #: the run directory (trajectories, checkpoints, metrics.jsonl, report.json).
    run_dir: str = ""
    #: wandb logging: "offline", "online" or "disabled".
    wandb_mode: str = "offline"
    #: the wandb project.
    wandb_project: str = "maigym_ray"

    def __post_init__(self) -> None:
        if not self.run_dir:
            raise ConfigError("run_dir: the driver needs a run directory")
        if self.wandb_mode not in WANDB_MODES:
            raise ConfigError(f"wandb.mode={self.wandb_mode!r}: choose one of {', '.join(WANDB_MODES)}")


@dataclass
class TaskSplit:
    """The tasks a training job uses, by role. No held-out task may enter training."""

    #: the SFT warm-up's tasks: their golden solutions are the demonstrations.
    train: list[TaskSpec]
    #: the tasks the held-out evals score.
    heldout: list[TaskSpec]
    #: the tasks RL samples (None: ``train``); they may have no demonstrations at all (verifier-only RL, e.g.
    #: on novel apps).
    rl: list[TaskSpec] | None = None

    def __post_init__(self) -> None:
        if self.rl is None:
            self.rl = self.train
        overlap = {t.id for t in [*self.train, *self.rl]} & {t.id for t in self.heldout}
        if overlap:
            raise ConfigError(f"held-out tasks must never enter training: {sorted(overlap)[:5]}")
