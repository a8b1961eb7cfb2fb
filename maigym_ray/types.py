"""Frozen data types shared by every layer: observations, actions, steps, trajectories, tasks and rewards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Platform = Literal["web", "mobile_web", "android", "desktop"]
PLATFORMS: tuple[str, ...] = ("web", "mobile_web", "android", "desktop")


@dataclass(frozen=True)
class Element:
    """One element of the accessibility text: a stable id, its role, name and centre in screen pixels."""

    id: str
    role: str
    name: str
    x: int
    y: int
    w: int
    h: int
    value: str = ""


@dataclass(frozen=True)
class Observation:
    """What the agent sees after a reset or a step.

    ``screenshot`` is PNG bytes (may be empty when disabled). ``a11y`` is the accessibility text, one element per
    line, each starting with ``[id]``. ``last_action_error`` carries the agent's previous mistake, if any, so the
    model can read it; it is an observation, not an exception.
    """

    platform: str
    screenshot: bytes
    width: int
    height: int
    a11y: str
    url: str = ""
    app: str = ""
    elements: tuple[Element, ...] = ()
    last_action_error: str = ""
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    """A parsed action of the grammar: a name plus keyword arguments (already type-checked by the parser)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_text(self) -> str:
        """Renders the action back into the grammar, e.g. ``click(id="search")`` (compact, re-parsable)."""
        import json

        def lit(v: Any) -> str:
            if isinstance(v, float):  # the grammar has no exponent form: 1e-06 must read 0.000001
                return f"{v:.6f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))
            if isinstance(v, list):
                return "[" + ",".join(lit(x) for x in v) + "]"
            return json.dumps(v, ensure_ascii=False)

        return f"{self.name}({','.join(f'{k}={lit(v)}' for k, v in self.args.items())})"


@dataclass(frozen=True)
class StepResult:
    """The result of one ``step``: the next observation, whether the episode ended, and step info."""

    observation: Observation
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reward:
    """The verifier's verdict. ``value`` is in [0, 1]; ``infra_failed`` marks an episode that must not be scored."""

    value: float
    success: bool
    reason: str = ""
    infra_failed: bool = False


@dataclass(frozen=True)
class Turn:
    """One step of a trajectory as the harness saw it (token fields are filled by the harness/engine layer)."""

    index: int
    action_text: str
    action: Action | None
    parse_error: str = ""
    prompt_ids: tuple[int, ...] = ()
    response_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    screenshot: bytes = b""
    timings: dict[str, float] = field(default_factory=dict)
    #: the accessibility text of the observation the policy acted on.
    a11y: str = ""
    #: the prompt's text: the whole window, or, where ``prompt_continued``, only what follows the previous step's
    #: prompt and response (inside a history window the prompt only grows, so a window's text is kept once;
    #: :func:`maigym_ray.harness.history.prompt_windows` rebuilds every step's window). "" for policies that
    #: read no prompt (golden, random).
    prompt_text: str = ""
    prompt_continued: bool = False
    #: the policy's whole reply (``action_text`` is the action cut out of it).
    response_text: str = ""
    #: the regex the reply was sampled under (``policy.action_space``); "" when decoding was free. The trainer
    #: rebuilds the same token masks from it, so it trains the policy that acted.
    constraint: str = ""
    #: the policy version of the weights the reply's request started on (0 for policies without weights); the
    #: staleness of asynchronous RL counts from an episode's first turn (rl/staleness.py).
    policy_version: int = 0


@dataclass(frozen=True)
class Trajectory:
    """A whole episode: its task, turns, reward and whether it went unscored (``infra_failed``: the
    infrastructure or the task failed under it; :attr:`outcome` says which)."""

    episode_id: str
    task_id: str
    platform: str
    turns: tuple[Turn, ...]
    reward: Reward
    infra_failed: bool = False
    error: str = ""
    policy_version: int = 0

    @property
    def outcome(self) -> str:
        """How the episode ended: "success", "failure", "task_error" (the task or its verifier is broken) or
        "infra_failed". Only success and failure are scores; the other two carry ``infra_failed=True`` so
        every consumer leaves them out of rates and gradients, and ``error`` (kept on disk) tells them apart."""
        if self.error.startswith("TaskError"):
            return "task_error"
        if self.infra_failed:
            return "infra_failed"
        return "success" if self.reward.success else "failure"


@dataclass(frozen=True)
class TaskSpec:
    """A task: what to do, on which apps and platforms, from which initial state, and how it is judged.

    ``initial_state`` maps app name to that app's seed (JSON-able). ``verifier`` names a registered verifier
    and its parameters: ``{"name": ..., "params": {...}}``. ``golden`` is the golden solution as action strings
    in the harness grammar; it is written independently of the verifier.
    """

    id: str
    instruction: str
    apps: tuple[str, ...]
    platforms: tuple[str, ...] = ("web",)
    initial_state: dict[str, Any] = field(default_factory=dict)
    start_app: str = ""
    verifier: dict[str, Any] = field(default_factory=dict)
    golden: tuple[str, ...] = ()
    max_steps: int = 20
    tags: tuple[str, ...] = ()
    split: str = "train"


class EnvHandle(Protocol):
    """One leased environment instance: what ``run_episode`` and live task validation drive.
    ``envs/lease.LeasedEnv`` is the one implementation over the EnvManager; tests pass in-process fakes.
    Infrastructure failures raise :class:`~maigym_ray.errors.InfraError`; a broken task raises TaskError."""

    async def reset(self, task: TaskSpec) -> Observation:
        """Resets to ``task``'s initial state and returns the first observation."""
        ...

    async def step(self, action: str) -> StepResult:
        """One action in the harness grammar; a refused action is an observation, not an exception."""
        ...

    async def evaluate(self) -> Reward:
        """The task's verifier on the current state."""
        ...

    async def state(self) -> dict[str, Any]:
        """Every app's state (JSON-able), for reset checks."""
        ...
