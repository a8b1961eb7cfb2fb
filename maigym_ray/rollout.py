"""The one rollout path as a Ray task: lease an env, run ``run_episode`` with the configured policy, release.

Eval, data collection and RL all submit this task; they differ only in what they do with the Trajectory. The
task is stateless (``num_cpus=0``: it mostly waits on the env and the engines); what it builds per policy
(the tokenizer) is cached per worker process.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from maigym_ray.config import PolicyConfig
from maigym_ray.errors import ConfigError
from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.model_policy import ModelPolicy
from maigym_ray.harness.policy import GoldenPolicy, PolicyClient, RandomPolicy
from maigym_ray.harness.prompt import PromptBuilder
from maigym_ray.types import TaskSpec, Trajectory


@functools.lru_cache(maxsize=4)
def load_tokenizer(model_dir: str) -> Any:
    """The fast tokenizer of a model directory (``tokenizers`` only: light enough for every worker)."""
    from tokenizers import Tokenizer

    path = Path(model_dir) / "tokenizer.json"
    if not path.exists():
        raise ConfigError(f"{model_dir} has no tokenizer.json (a fast tokenizer is needed for token-in/out)")
    return Tokenizer.from_file(str(path))


def make_policy(cfg: PolicyConfig, engines: list[Any] | None = None) -> PolicyClient:
    """The policy ``cfg`` names; model policies use ``engines`` (engine actor handles) or an OpenAI server."""
    if cfg.kind == "golden":
        return GoldenPolicy()
    if cfg.kind == "random":
        return RandomPolicy(cfg.seed)
    if cfg.kind not in ("engine", "openai"):
        raise ConfigError(
            f"policy.kind={cfg.kind!r} is not valid; choose one of: golden, random, engine, openai"
        )
    from maigym_ray.policy.engine import resolve_model

    tok = load_tokenizer(resolve_model(cfg.engine.model))
    if cfg.kind == "engine":
        from maigym_ray.policy.router import EngineRouter

        if not engines:
            raise ConfigError("policy.kind=engine needs engine actors")
        engine: Any = EngineRouter(engines, cfg.router, cfg.seed)
    else:
        from maigym_ray.policy.openai_client import OpenAIEngine

        engine = OpenAIEngine(cfg.openai_base_url, cfg.openai_model or cfg.engine.model, tok)
    builder = PromptBuilder(lambda s: tok.encode(s, add_special_tokens=False).ids, cfg.prompt)
    return ModelPolicy(
        engine, builder, lambda ids: tok.decode(ids, skip_special_tokens=True), cfg.history, cfg.sampling
    )


async def rollout(
    manager: Any,
    task: TaskSpec,
    platform: str,
    policy: PolicyConfig,
    engines: list[Any] | None,
    step_timeout_s: float = 30.0,
    keep_screenshots: bool = False,
) -> Trajectory:
    """Leases an instance of ``platform``, runs one episode of ``task`` and releases the instance."""
    from maigym_ray.envs.lease import LeasedEnv

    env = await LeasedEnv.acquire(manager, platform, step_timeout_s)
    try:
        return await run_episode(env, task, make_policy(policy, engines), keep_screenshots)
    finally:
        await env.release()


def rollout_task(
    manager: Any,
    task: TaskSpec,
    platform: str,
    policy: PolicyConfig,
    engines: list[Any] | None,
    step_timeout_s: float = 30.0,
    keep_screenshots: bool = False,
) -> Trajectory:
    """``rollout`` as a plain function, for ``ray.remote(rollout_task).options(num_cpus=0)``."""
    import asyncio

    return asyncio.run(rollout(manager, task, platform, policy, engines, step_timeout_s, keep_screenshots))


def start_engines(policy: PolicyConfig) -> list[Any]:
    """Starts ``policy.num_engines`` vLLM engine actors (kind "engine"); returns their handles, started."""
    import ray

    from maigym_ray.policy.engine import EngineActor

    if policy.kind != "engine":
        return []
    env = {"VLLM_CPU_KVCACHE_SPACE": str(policy.engine.cpu_kv_cache_gb)}
    engines = [
        ray.remote(EngineActor).options(num_cpus=0, runtime_env={"env_vars": env}).remote(policy.engine, i)
        for i in range(policy.num_engines)
    ]
    ray.get([e.start.remote() for e in engines])
    return engines
