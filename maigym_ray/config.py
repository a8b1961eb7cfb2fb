"""Config schema: dataclasses that Hydra composes (``conf/``) and ``cli/`` builds objects from.

Objects receive these plain dataclasses (never a DictConfig). Every field is documented; unknown keys are
errors because the schemas are registered as structured configs. The environment layer's part (backends, pools,
the env manager) lives in :mod:`maigym_ray.envs.config`, so the envs import no layer above them; it is re-exported
here for the entry points. The harness's settings (:mod:`maigym_ray.harness.config`) and the engine's
(:mod:`maigym_ray.policy.config`) likewise live with their kinds, in modules that import only the foundation, so
composing a run's config imports neither the harness's logic nor the policy's (tests/unit/test_layers.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maigym_ray.envs.config import (
    BROWSER_MODES,
    AndroidBackendConfig,
    DesktopBackendConfig,
    EnvManagerConfig,
    LibvirtProviderConfig,
    PoolConfig,
    ShardingConfig,
    WebBackendConfig,
    check_choice,
)
from maigym_ray.envs.validation import validate_manager_config
from maigym_ray.generation import SamplingConfig
from maigym_ray.harness.config import ActionSpaceConfig, ChatConfig, HistoryConfig, PromptConfig
from maigym_ray.policy.config import EngineConfig


@dataclass
class PolicyConfig:
    """The policy that acts, and for model policies how prompts, history, sampling and engines are set up."""

    #: a registered policy kind (rollout.POLICIES, entry-point group maigym_ray.policies): "golden" (replays
    #: golden solutions), "random" (random clicks and typing), "engine" (vLLM engine actors started by the run),
    #: "openai" (any OpenAI-compatible server, settings under ``options``), "demo" (golden solutions as
    #: token-in / token-out model turns: the SFT warm-up's samples), or a kind a package adds.
    kind: str = "golden"
    #: seed of the random policy.
    seed: int = 0
    #: what an observation turn shows and the history strategy (K, O, k).
    prompt: PromptConfig = field(default_factory=PromptConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    #: what the model may sample: free text, or only the documented actions on the screen's element ids.
    action_space: ActionSpaceConfig = field(default_factory=ActionSpaceConfig)
    #: engines of kind "engine" (one vLLM engine per actor).
    engine: EngineConfig = field(default_factory=EngineConfig)
    num_engines: int = 1
    #: "sticky" (every request of an episode to one engine) or "random".
    router: str = "sticky"
    #: seconds one engine ``generate`` may take; past it the engine counts as hung (an infrastructure
    #: failure) and the router moves the episode to a live engine.
    generate_timeout_s: float = 120.0
    #: the kind's own settings, read into its registered settings class (``PolicyKind.options``; kind "openai":
    #: policy/config.OpenAIConfig's base_url, model, api_key_env). ``policy=openai`` (Hydra group) fills in
    #: every setting with its default, so ``policy.options.base_url=...`` then needs no "+".
    options: dict[str, Any] = field(default_factory=dict)
    #: the model's chat markup around system, user and assistant turns (model kinds: engine, openai, demo).
    chat: ChatConfig = field(default_factory=ChatConfig)
    #: the token that ends a model turn (kind "demo" closes every golden response with it).
    end_of_turn: str = "<|im_end|>"


@dataclass
class RayConfig:
    """How to reach or start Ray."""

    #: "" starts a local single-node Ray of its own on loopback (never one found on the machine); "auto" or an
    #: address joins a cluster.
    address: str = ""
    #: CPUs a local Ray advertises (0 = all cores).
    num_cpus: int = 0
    #: object store size for a local Ray, in MB.
    object_store_mb: int = 512


__all__ = [
    "BROWSER_MODES",
    "AndroidBackendConfig",
    "DesktopBackendConfig",
    "EnvManagerConfig",
    "LibvirtProviderConfig",
    "PolicyConfig",
    "PoolConfig",
    "RayConfig",
    "ShardingConfig",
    "WebBackendConfig",
    "check_choice",
    "validate_manager_config",
]
