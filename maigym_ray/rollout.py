"""The one rollout path as a Ray task: lease an env, run ``run_episode`` with the configured policy, release.

Eval, data collection and RL all submit this task; they differ only in what they do with the Trajectory. The
task is stateless (``num_cpus=0``: it mostly waits on the env and the engines); what it builds per policy
(the tokenizer) is cached per worker process.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maigym_ray.config import PolicyConfig
from maigym_ray.errors import ConfigError, InfraError, TaskError
from maigym_ray.harness.chat_template import model_template
from maigym_ray.harness.demonstration import DemonstrationPolicy
from maigym_ray.harness.episode import run_episode, unscored
from maigym_ray.harness.model_policy import ModelPolicy
from maigym_ray.harness.policy import GoldenPolicy, PolicyClient, RandomPolicy
from maigym_ray.harness.prompt import ChatFormat, PromptBuilder, build_chat_format
from maigym_ray.plugins import Registry, read_options
from maigym_ray.policy.config import OpenAIConfig
from maigym_ray.types import TaskSpec, Trajectory


@functools.lru_cache(maxsize=4)
def load_tokenizer(model_dir: str) -> Any:
    """The fast tokenizer of a model directory (``tokenizers`` only: light enough for every worker)."""
    from tokenizers import Tokenizer

    path = Path(model_dir) / "tokenizer.json"
    if not path.exists():
        raise ConfigError(f"{model_dir} has no tokenizer.json (a fast tokenizer is needed for token-in/out)")
    return Tokenizer.from_file(str(path))


#: Scripted golden policies of suites whose golden solutions depend on the screen (a MiniWoB++ page draws its
#: task at random from the seed), by suite tag (entry-point group ``maigym_ray.golden_scripts``): a class whose
#: instances play any task of that suite. Imported on first use.
GOLDEN_SCRIPTS: Registry[type] = Registry("golden_scripts", "golden script")


class SuiteGoldenPolicy:
    """The golden policy: a task's fixed golden actions, or for a suite task without them (its first tag in
    :data:`GOLDEN_SCRIPTS`) that suite's scripted solution."""

    def __init__(self) -> None:
        self._golden = GoldenPolicy()
        self._scripted: dict[str, Any] = {}
        self._episodes: dict[str, Any] = {}

    def _for(self, task: TaskSpec) -> Any:
        suite = task.tags[0] if task.tags else ""
        if task.golden or suite not in GOLDEN_SCRIPTS:
            return self._golden
        if suite not in self._scripted:
            self._scripted[suite] = GOLDEN_SCRIPTS.load(suite)()
        return self._scripted[suite]

    async def act(self, task: TaskSpec, observation: Any, step: int, episode_id: str = "") -> Any:
        policy = self._for(task)
        self._episodes[episode_id] = policy
        return await policy.act(task, observation, step, episode_id)

    def end_episode(self, episode_id: str) -> None:
        """Lets a scripted policy forget the episode (run_episode calls it)."""
        end = getattr(self._episodes.pop(episode_id, None), "end_episode", None)
        if end is not None:
            end(episode_id)


def api_key_from_env(name: str) -> str:
    """The API key in environment variable ``name`` ("" for no name); a named variable that is unset or empty
    is a ConfigError (a server that needs the key would otherwise answer 401 on every episode)."""
    if not name:
        return ""
    import os

    key = os.environ.get(name, "")
    if not key:
        raise ConfigError(f"policy.options.api_key_env={name!r}: that environment variable is not set")
    return key


def check_model_settings(cfg: PolicyConfig) -> None:
    """Fails fast (ConfigError), before any episode, on an unknown policy kind or the kind's bad settings (a
    model policy's chat format, context length or missing API key)."""
    kind = policy_kind(cfg.kind)
    policy_options(cfg)
    if kind.check is not None:
        kind.check(cfg)


def chat_format(cfg: PolicyConfig) -> ChatFormat:
    """The chat markup of ``cfg``: with ``chat.format: auto`` the model's own template's."""
    from maigym_ray.policy.engine import resolve_model

    template = None
    if cfg.chat.format == "auto":
        template = model_template(resolve_model(cfg.engine.model))
    try:
        return build_chat_format(cfg.chat, template)
    except ValueError as exc:
        raise ConfigError(f"policy.{exc}") from exc


@dataclass(frozen=True)
class PolicyKind:
    """What a policy kind registers (entry-point group ``maigym_ray.policies``; an entry point may also name a
    bare ``build``)."""

    #: ``build(cfg, engines) -> PolicyClient``: the policy, with ``engines`` the run's engine actors (or None).
    build: Callable[[PolicyConfig, list[Any] | None], PolicyClient]
    #: ``check(cfg)``: fails fast (ConfigError) on the kind's bad settings before any episode; None: no check.
    check: Callable[[PolicyConfig], None] | None = None
    #: the run starts ``policy.num_engines`` engine actors for it (and hands them to ``build``).
    engines: bool = False
    #: ``client(cfg, engines) -> Engine``: the kind's model as a bare engine (token ids in, ids out), for callers
    #: that want free text rather than actions (:func:`text_client`); None: the kind has no model to ask.
    client: Callable[[PolicyConfig, list[Any] | None], Any] | None = None
    #: the kind's settings dataclass, which ``policy.options`` is read into (:func:`policy_options`); None: the
    #: kind takes no options.
    options: type | None = None


def _accept(name: str, obj: Any) -> PolicyKind:
    if isinstance(obj, PolicyKind):
        return obj
    if callable(obj):
        return PolicyKind(build=obj)
    raise ConfigError(f"policy kind {name!r} is a {type(obj).__name__}, not a PolicyKind or a builder")


#: Policy kinds by name: golden, random, engine, openai and demo (this module), and any a package adds.
POLICIES: Registry[PolicyKind] = Registry("policies", "policy.kind", _accept)


def policy_kind(kind: str) -> PolicyKind:
    """The registered policy kind; ConfigError listing the registered kinds when there is none."""
    return POLICIES.load(kind)


def policy_options(cfg: PolicyConfig) -> Any:
    """``cfg.options`` read into its kind's settings class (None for a kind that takes none); an unknown key or
    a wrong type is a ConfigError naming its key path (``policy.options.KEY``)."""
    return read_options(policy_kind(cfg.kind).options, cfg.options, "policy", f"policy kind {cfg.kind!r}")


def make_policy(cfg: PolicyConfig, engines: list[Any] | None = None) -> PolicyClient:
    """The policy ``cfg.kind`` names, built by its registered kind; model policies use ``engines`` (engine actor
    handles) or an OpenAI server."""
    return policy_kind(cfg.kind).build(cfg, engines)


def _model_parts(cfg: PolicyConfig) -> tuple[Any, PromptBuilder]:
    """A model policy's tokenizer and prompt builder."""
    from maigym_ray.policy.engine import resolve_model

    tok = load_tokenizer(resolve_model(cfg.engine.model))
    builder = PromptBuilder(
        lambda s: tok.encode(s, add_special_tokens=False).ids, cfg.prompt, chat_format(cfg)
    )
    return tok, builder


def _model_policy(cfg: PolicyConfig, engine: Any, tok: Any, builder: PromptBuilder) -> PolicyClient:
    return ModelPolicy(
        engine,
        builder,
        lambda ids: tok.decode(ids, skip_special_tokens=True),
        cfg.history,
        cfg.sampling,
        action_space=cfg.action_space,
    )


def engine_client(cfg: PolicyConfig, engines: list[Any] | None) -> Any:
    """The run's vLLM engine actors behind one router (every request of an episode to one engine)."""
    from maigym_ray.policy.router import EngineRouter

    if not engines:
        raise ConfigError("policy.kind=engine needs engine actors")
    return EngineRouter(engines, cfg.router, cfg.seed, cfg.generate_timeout_s)


def openai_client(cfg: PolicyConfig, engines: list[Any] | None) -> Any:
    """Any OpenAI-compatible server, with the model's local tokenizer."""
    from maigym_ray.policy.engine import resolve_model
    from maigym_ray.policy.openai_client import OpenAIEngine

    opts = policy_options(cfg)
    return OpenAIEngine(
        opts.base_url,
        opts.model or cfg.engine.model,
        load_tokenizer(resolve_model(cfg.engine.model)),
        api_key_from_env(opts.api_key_env),
    )


def build_engine(cfg: PolicyConfig, engines: list[Any] | None) -> PolicyClient:
    """``engine``: the model on the run's vLLM engine actors, every request of an episode to one engine."""
    engine = engine_client(cfg, engines)
    return _model_policy(cfg, engine, *_model_parts(cfg))


def build_openai(cfg: PolicyConfig, engines: list[Any] | None) -> PolicyClient:
    """``openai``: any OpenAI-compatible server."""
    return _model_policy(cfg, openai_client(cfg, engines), *_model_parts(cfg))


def text_client(cfg: PolicyConfig, engines: list[Any] | None) -> Callable[[str, str], Any]:
    """``ask(text, episode_id) -> reply`` (a coroutine) over the model of ``cfg.kind`` (one with a registered
    ``client``): ``text`` goes as one user turn in the model's chat format, ``cfg.sampling`` samples the reply,
    decoded to text. Requests with one ``episode_id`` go to one engine (its prefix cache holds the prompt)."""
    kind = policy_kind(cfg.kind)
    if kind.client is None:
        raise ConfigError(f"policy.kind={cfg.kind!r} has no model to ask for text (engine and openai have)")
    engine = kind.client(cfg, engines)
    tok, _ = _model_parts(cfg)
    fmt = chat_format(cfg)

    async def ask(text: str, episode_id: str) -> str:
        ids = tok.encode(fmt.user.format(text=text) + fmt.assistant_open, add_special_tokens=False).ids
        out = await engine.generate(ids, [], cfg.sampling, episode_id)
        return str(tok.decode(list(out.response_ids), skip_special_tokens=True))

    return ask


def build_demo(cfg: PolicyConfig, engines: list[Any] | None) -> PolicyClient:
    """``demo``: golden solutions as token-in / token-out model turns (the SFT warm-up's samples)."""
    tok, builder = _model_parts(cfg)
    end = tok.token_to_id(cfg.end_of_turn)
    if end is None:
        raise ConfigError(f"policy.end_of_turn={cfg.end_of_turn!r} is not a token of {cfg.engine.model}")
    return DemonstrationPolicy(
        builder,
        lambda s: tok.encode(s, add_special_tokens=False).ids,
        lambda ids: tok.decode(ids, skip_special_tokens=True),
        (end,),
        cfg.history,
        golden=SuiteGoldenPolicy(),  # a suite task without golden actions (MiniWoB++) uses its scripted solver
    )


def check_engine(cfg: PolicyConfig) -> None:
    """An engine policy's chat format and context length."""
    from maigym_ray.policy.engine import max_model_len, resolve_model

    chat_format(cfg)
    max_model_len(cfg.engine, resolve_model(cfg.engine.model))


def check_openai(cfg: PolicyConfig) -> None:
    """An OpenAI policy's chat format and API key."""
    chat_format(cfg)
    api_key_from_env(policy_options(cfg).api_key_env)


GOLDEN = PolicyKind(build=lambda cfg, engines: SuiteGoldenPolicy())
RANDOM = PolicyKind(build=lambda cfg, engines: RandomPolicy(cfg.seed))
ENGINE = PolicyKind(build=build_engine, check=check_engine, engines=True, client=engine_client)
OPENAI = PolicyKind(build=build_openai, check=check_openai, client=openai_client, options=OpenAIConfig)
DEMO = PolicyKind(build=build_demo, check=chat_format)


async def rollout(
    manager: Any,
    task: TaskSpec,
    platform: str,
    policy: PolicyConfig,
    engines: list[Any] | None,
    step_timeout_s: float = 30.0,
    keep_screenshots: bool = False,
    episode_timeout_s: float = 0.0,
) -> Trajectory:
    """Leases an instance of ``platform``, runs one episode of ``task`` and releases the instance. An episode
    past ``episode_timeout_s`` (0 = no limit) is cancelled here, so its lease is still released, and its
    instance is reported failed (it may be stuck)."""
    from maigym_ray.envs.lease import LeasedEnv

    try:  # no lease (timeout, dead manager) is an infrastructure failure of this episode, not of the batch
        env = await LeasedEnv.acquire(manager, platform, step_timeout_s)
    except Exception as exc:
        return unscored(task, _infra(exc))
    try:
        episode = run_episode(env, task, make_policy(policy, engines), keep_screenshots)
        if episode_timeout_s <= 0:
            return await episode
        try:
            return await asyncio.wait_for(episode, episode_timeout_s)
        except TimeoutError:
            await manager.report_failure.remote(env.lease, "episode timeout")
            return unscored(task, InfraError(f"the episode ran past episode_timeout_s={episode_timeout_s}"))
    finally:
        try:
            await env.release()
        except Exception:  # the manager replaces what it cannot release; the episode is already recorded
            pass


def rollout_task(
    manager: Any,
    task: TaskSpec,
    platform: str,
    policy: PolicyConfig,
    engines: list[Any] | None,
    step_timeout_s: float = 30.0,
    keep_screenshots: bool = False,
    episode_timeout_s: float = 0.0,
) -> Trajectory:
    """``rollout`` as a plain function, for ``ray.remote(rollout_task).options(...)`` (runtime/placement.py)."""
    return asyncio.run(
        rollout(manager, task, platform, policy, engines, step_timeout_s, keep_screenshots, episode_timeout_s)
    )


# Seconds the driver waits past an episode's deadline before it kills the rollout task (which should have
# ended the episode and released its lease by itself).
_BACKSTOP_S = 30.0


def _infra(exc: BaseException) -> BaseException:
    """``exc`` as the failure it is: TaskErrors stay task errors, everything else is infrastructure's."""
    return exc if isinstance(exc, TaskError | InfraError) else InfraError(f"{type(exc).__name__}: {exc}")


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

    @property
    def outcome(self) -> str:
        """success, failure, task_error or infra_failed (see :attr:`Trajectory.outcome`)."""
        return self.trajectory.outcome


def outcome_counts(done: list[Finished]) -> dict[str, int]:
    """How many episodes ended each way: every key of success, failure, task_error, infra_failed."""
    counts = dict.fromkeys(("success", "failure", "task_error", "infra_failed"), 0)
    for f in done:
        counts[f.outcome] += 1
    return counts


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
    episode_timeout_s: float = 0.0,
    *,
    task_options: dict[str, Any],
) -> list[Finished]:
    """Runs every ``(item, task, platform)`` of ``work`` as a rollout Ray task, ``concurrency`` at a time.

    Every item comes back exactly once, as a success, a failure, a task error or an infrastructure failure:
    one failing episode never discards the others. An infrastructure failure (a dead env or engine, a lease
    timeout, the rollout task's worker dying, an episode past ``episode_timeout_s``) is retried on a fresh lease
    up to ``infra_retries`` times, then returned infra-failed, never as a score. A task error (the verifier
    raised) is not retried: it would fail the same way. ``on_finished`` sees every returned episode as it
    finishes (progress bars, writers); an exception it raises is the caller's and stops the run. Results come
    back in finishing order. ``task_options`` are the rollout task's Ray options, from the placement layer
    (``Placement.rollout_task()``): this module hard-codes no resource.
    """
    import ray

    remote = ray.remote(rollout_task).options(**task_options)
    queue: asyncio.Queue[tuple[Any, TaskSpec, str, int]] = asyncio.Queue()
    for item, task, plat in work:
        queue.put_nowait((item, task, plat, 0))
    done: list[Finished] = []

    async def one(task: TaskSpec, plat: str) -> Trajectory:
        ref = remote.remote(
            manager, task, plat, policy, engines, step_timeout_s, keep_screenshots, episode_timeout_s
        )
        try:
            if episode_timeout_s > 0:  # a backstop: the task enforces the deadline itself and releases
                return await asyncio.wait_for(ref, episode_timeout_s + _BACKSTOP_S)
            return await ref
        except Exception as exc:  # the rollout task itself failed: its worker died, it hung, a bug
            if isinstance(exc, TimeoutError):
                ray.cancel(ref, force=True)
                exc = InfraError(f"the rollout task ran past episode_timeout_s={episode_timeout_s}")
            return unscored(task, _infra(exc))

    async def worker() -> None:
        while not queue.empty():
            item, task, plat, attempt = queue.get_nowait()
            t0 = time.perf_counter()
            traj = await one(task, plat)
            if traj.outcome == "infra_failed" and attempt < infra_retries:
                queue.put_nowait((item, task, plat, attempt + 1))
                continue
            fin = Finished(item, task, plat, traj, attempt, time.perf_counter() - t0)
            done.append(fin)
            if on_finished is not None:
                on_finished(fin)

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return done
