"""Config schema: dataclasses that Hydra composes (``conf/``) and ``cli/`` builds objects from.

Objects receive these plain dataclasses (never a DictConfig). Every field is documented; unknown keys are
errors because the schemas are registered as structured configs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from maigym_ray.errors import ConfigError
from maigym_ray.harness.history import HistoryConfig
from maigym_ray.harness.model_policy import SamplingConfig
from maigym_ray.harness.prompt import PromptConfig
from maigym_ray.policy.engine import EngineConfig

BACKEND_KINDS = ("web", "android", "desktop")
BROWSER_MODES = ("shared", "per_env")


@dataclass
class WebBackendConfig:
    """Playwright + Chromium backend settings."""

    #: "web" (desktop viewport, pointer) or "mobile_web" (phone viewport, touch emulation).
    platform: str = "web"
    #: viewport in CSS pixels; 0 means the platform default (1024x768 web, 390x844 mobile_web).
    width: int = 0
    height: int = 0
    #: "shared": one Chromium per node, a browser context per env; "per_env": one Chromium per env actor.
    browser: str = "shared"
    #: how reset clears the browser: "context" (a fresh browser context: new cookies, storage, history and
    #: renderer; bounded memory) or "reload" (clear cookies, reload, wipe history: ~60 ms faster).
    reset: str = "context"
    #: Chromium binary; "" finds Debian's real binary (never downloads a browser).
    executable: str = ""
    #: the longest a navigation may take to load before the step fails as an infrastructure error.
    settle_timeout_s: float = 10.0
    #: include a PNG screenshot in every observation.
    screenshot: bool = True
    #: the longest `wait(seconds=...)` honoured.
    wait_cap_s: float = 5.0


@dataclass
class PoolConfig:
    """One warm pool of identical instances (one backend kind on one platform)."""

    #: the platform the pool serves: web, mobile_web, android or desktop.
    platform: str = "web"
    #: backend kind: web, android or desktop.
    backend: str = "web"
    #: instances kept started and idle ahead of demand.
    target_size: int = 2
    #: the most instances the pool may hold (busy + idle + starting).
    max_size: int = 8
    #: replace an instance after this many episodes (long-lived devices degrade); 0 = never.
    recycle_after: int = 50
    #: CPUs reserved per env actor (0 lets many async actors share a core).
    num_cpus: float = 0.0
    #: environment variables of the env actor processes. Two malloc arenas keep each actor's heap compact:
    #: glibc's default of 8 per core mostly holds freed screenshot buffers.
    env_vars: dict[str, str] = field(default_factory=lambda: {"MALLOC_ARENA_MAX": "2"})
    #: web backend settings (used when backend == "web").
    web: WebBackendConfig = field(default_factory=WebBackendConfig)


@dataclass
class EnvManagerConfig:
    """The environment manager: pools, apps, timeouts and health checks."""

    #: the pools to run, keyed by a pool name; tasks are routed to a pool of their platform.
    pools: dict[str, PoolConfig] = field(default_factory=lambda: {"web": PoolConfig()})
    #: mocked apps every instance hosts; ["all"] hosts every registered app.
    apps: list[str] = field(default_factory=lambda: ["all"])
    #: address the app servers bind to (loopback; a bridge address for containers and VMs).
    app_bind: str = "127.0.0.1"
    #: per-operation time limits in seconds.
    start_timeout_s: float = 60.0
    reset_timeout_s: float = 20.0
    step_timeout_s: float = 20.0
    observe_timeout_s: float = 10.0
    evaluate_timeout_s: float = 10.0
    #: how long `request` waits for free instances before failing as EnvUnavailableError.
    request_timeout_s: float = 120.0
    #: seconds between health checks of idle instances.
    health_interval_s: float = 5.0
    #: how many times a failed instance start is retried before the pool reports it.
    start_retries: int = 3


@dataclass
class PolicyConfig:
    """The policy that acts, and for model policies how prompts, history, sampling and engines are set up."""

    #: "golden" (replays golden solutions), "random" (random clicks and typing), "engine" (vLLM engine
    #: actors started by the run), "openai" (any OpenAI-compatible server), "demo" (golden solutions as
    #: token-in / token-out model turns: the SFT warm-up's samples).
    kind: str = "golden"
    #: seed of the random policy.
    seed: int = 0
    #: what an observation turn shows and the history strategy (K, O, k).
    prompt: PromptConfig = field(default_factory=PromptConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    #: engines of kind "engine" (one vLLM engine per actor).
    engine: EngineConfig = field(default_factory=EngineConfig)
    num_engines: int = 1
    #: "sticky" (every request of an episode to one engine) or "random".
    router: str = "sticky"
    #: kind "openai": the server's base URL (…/v1), model name and tokenizer directory ("" = engine.model).
    openai_base_url: str = "http://127.0.0.1:8000/v1"
    openai_model: str = ""
    #: the token that ends a model turn (kind "demo" closes every golden response with it).
    end_of_turn: str = "<|im_end|>"


POLICY_KINDS = ("golden", "random", "engine", "openai", "demo")


@dataclass
class RayConfig:
    """How to reach or start Ray."""

    #: "" starts a local single-node Ray on loopback; "auto" or an address joins a cluster.
    address: str = ""
    #: CPUs a local Ray advertises (0 = all cores).
    num_cpus: int = 0
    #: object store size for a local Ray, in MB.
    object_store_mb: int = 512


def check_choice(name: str, value: str, choices: tuple[str, ...] | list[str]) -> None:
    """Raises :class:`ConfigError` listing ``choices`` when ``value`` is not one of them."""
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not valid; choose one of: {', '.join(choices)}")


def validate_manager_config(cfg: EnvManagerConfig) -> None:
    """Checks names and sizes in an EnvManagerConfig, raising :class:`ConfigError` with the valid choices."""
    from maigym_ray.apps.registry import APP_CLASSES
    from maigym_ray.types import PLATFORMS

    if cfg.apps != ["all"]:
        unknown = [a for a in cfg.apps if a not in APP_CLASSES]
        if unknown:
            raise ConfigError(f"unknown app(s) {unknown}; valid apps: {', '.join(sorted(APP_CLASSES))}")
    if not cfg.pools:
        raise ConfigError("env.pools is empty: configure at least one pool")
    for name, pool in cfg.pools.items():
        check_choice(f"env.pools.{name}.backend", pool.backend, BACKEND_KINDS)
        check_choice(f"env.pools.{name}.platform", pool.platform, PLATFORMS)
        if pool.backend == "web":
            check_choice(f"env.pools.{name}.web.browser", pool.web.browser, BROWSER_MODES)
            check_choice(f"env.pools.{name}.web.reset", pool.web.reset, ("context", "reload"))
            check_choice(f"env.pools.{name}.web.platform", pool.web.platform, ("web", "mobile_web"))
            if pool.web.platform != pool.platform:
                raise ConfigError(
                    f"env.pools.{name}: web.platform {pool.web.platform!r} != platform {pool.platform!r}"
                )
        if pool.backend != "web":
            raise ConfigError(
                f"env.pools.{name}.backend={pool.backend!r} is not available in this build yet; available: web"
            )
        if not 0 <= pool.target_size <= pool.max_size or pool.max_size < 1:
            raise ConfigError(f"env.pools.{name}: need 0 <= target_size <= max_size and max_size >= 1")
