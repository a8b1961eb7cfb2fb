"""The one rollout path as a Ray task: lease an env, run ``run_episode`` with the configured policy, release.

Eval, data collection and RL all submit this task; they differ only in what they do with the Trajectory. The
task is stateless (``num_cpus=0``: it mostly waits on the env and the engines); what it builds per policy
(the tokenizer) is cached per worker process.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maigym_ray.config import PolicyConfig
from maigym_ray.errors import ConfigError
from maigym_ray.harness.demonstration import DemonstrationPolicy
from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.model_policy import ModelPolicy
from maigym_ray.harness.policy import GoldenPolicy, PolicyClient, RandomPolicy
from maigym_ray.harness.prompt import PromptBuilder
from maigym_ray.types import Reward, TaskSpec, Trajectory


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
    if cfg.kind not in ("engine", "openai", "demo"):
        raise ConfigError(
            f"policy.kind={cfg.kind!r} is not valid; choose one of: golden, random, engine, openai, demo"
        )
    from maigym_ray.policy.engine import resolve_model

    tok = load_tokenizer(resolve_model(cfg.engine.model))
    builder = PromptBuilder(lambda s: tok.encode(s, add_special_tokens=False).ids, cfg.prompt)
    if cfg.kind == "demo":
        end = tok.token_to_id(cfg.end_of_turn)
        if end is None:
            raise ConfigError(f"policy.end_of_turn={cfg.end_of_turn!r} is not a token of {cfg.engine.model}")
        return DemonstrationPolicy(
            builder,
            lambda s: tok.encode(s, add_special_tokens=False).ids,
            lambda ids: tok.decode(ids, skip_special_tokens=True),
            (end,),
            cfg.history,
        )
    if cfg.kind == "engine":
        from maigym_ray.policy.router import EngineRouter

        if not engines:
            raise ConfigError("policy.kind=engine needs engine actors")
        engine: Any = EngineRouter(engines, cfg.router, cfg.seed)
    else:
        from maigym_ray.policy.openai_client import OpenAIEngine

        engine = OpenAIEngine(cfg.openai_base_url, cfg.openai_model or cfg.engine.model, tok)
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
    """``rollout`` as a plain function, for ``ray.remote(rollout_task).options(...)`` (runtime/placement.py)."""
    import asyncio

    return asyncio.run(rollout(manager, task, platform, policy, engines, step_timeout_s, keep_screenshots))


def lost_episode(task: TaskSpec, platform: str, exc: BaseException) -> Trajectory:
    """The record of an episode whose rollout task was lost with its worker or node (an infra failure)."""
    import uuid

    reason = f"rollout task lost: {type(exc).__name__}"
    return Trajectory(
        f"lost-{uuid.uuid4().hex[:12]}",
        task.id,
        platform,
        (),
        Reward(0.0, False, reason, infra_failed=True),
        infra_failed=True,
        error=f"{reason}: {str(exc)[:300]}",
    )


@dataclass(frozen=True)
class Finished:
    """One finished episode of :func:`run_rollouts`: the work item, its trajectory, the attempt it took
    (0 = first) and its wall time."""

    item: Any
    task: TaskSpec
    platform: str
    trajectory: Trajectory
    attempt: int
    seconds: float


async def run_rollouts(
    manager: Any,
    work: list[tuple[Any, TaskSpec, str]],
    policy: PolicyConfig,
    engines: list[Any] | None,
    concurrency: int,
    infra_retries: int = 2,
    step_timeout_s: float = 30.0,
    keep_screenshots: bool = False,
    on_finished: Callable[[Finished], None] | None = None,
    task_options: dict[str, Any] | None = None,
) -> list[Finished]:
    """Runs every ``(item, task, platform)`` of ``work`` as a rollout Ray task, ``concurrency`` at a time.

    An episode that ends in an infrastructure failure is retried (on a fresh lease) up to ``infra_retries``
    times; if it still fails it is returned with ``infra_failed`` set, never as a score. ``on_finished`` sees
    every returned episode as it finishes (progress bars, writers). Results come back in finishing order.
    ``task_options`` are the rollout task's Ray options (``Placement.rollout_task()``).
    """
    import asyncio

    import ray

    remote = ray.remote(rollout_task).options(**(task_options or {"max_retries": 0}))
    queue: asyncio.Queue[tuple[Any, TaskSpec, str, int]] = asyncio.Queue()
    for item, task, plat in work:
        queue.put_nowait((item, task, plat, 0))
    done: list[Finished] = []

    async def worker() -> None:
        while not queue.empty():
            item, task, plat, attempt = queue.get_nowait()
            t0 = time.perf_counter()
            try:
                traj = await remote.remote(
                    manager, task, plat, policy, engines, step_timeout_s, keep_screenshots
                )
            except (
                ray.exceptions.RayError
            ) as exc:  # the task's worker or node died: infrastructure, never a 0
                traj = lost_episode(task, plat, exc)
            if traj.infra_failed and attempt < infra_retries:
                queue.put_nowait((item, task, plat, attempt + 1))
                continue
            fin = Finished(item, task, plat, traj, attempt, time.perf_counter() - t0)
            done.append(fin)
            if on_finished is not None:
                on_finished(fin)

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return done
