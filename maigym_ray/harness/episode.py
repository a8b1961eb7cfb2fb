"""run_episode: the one rollout loop shared by eval, data collection and RL.

It talks to an environment through :class:`EnvHandle` (reset/step/evaluate) and to a policy through
:class:`~maigym_ray.harness.policy.PolicyClient`. An infrastructure failure anywhere (the env or its actor
died, a timeout) ends the episode with ``infra_failed=True`` and no score, so it is retried or reported, never
counted as a 0. A task whose verifier raises (TaskError) ends the same way, as a task error. Agent mistakes are
ordinary steps with ``parse_error`` set.
"""

from __future__ import annotations

import time
import uuid

from maigym_ray.actions import parse_action
from maigym_ray.errors import ContextOverflowError, InfraError, TaskError
from maigym_ray.harness.policy import Decision, PolicyClient
from maigym_ray.types import Action, EnvHandle, Reward, TaskSpec, Trajectory, Turn


def unscored(
    task: TaskSpec, exc: BaseException, turns: tuple[Turn, ...] = (), episode_id: str = "", version: int = 0
) -> Trajectory:
    """The record of an episode that cannot be scored: ``exc`` is a TaskError (the task or its verifier is
    broken: ``outcome == "task_error"``) or anything else (an infrastructure failure). It keeps the turns that
    ran, and is never a 0."""
    kind = "TaskError" if isinstance(exc, TaskError) else type(exc).__name__
    lines = str(exc).splitlines() or [""]
    why = "task error" if kind == "TaskError" else "infrastructure failure"
    return Trajectory(
        episode_id or uuid.uuid4().hex,
        task.id,
        task.platforms[0],
        turns,
        Reward(0.0, False, why, infra_failed=True),
        infra_failed=True,
        error=f"{kind}: {lines[-1][:500]}",
        policy_version=version,
    )


def _parsed(text: str) -> Action | None:
    try:
        return parse_action(text)
    except Exception:
        return None


async def run_episode(
    env: EnvHandle, task: TaskSpec, policy: PolicyClient, keep_screenshots: bool = False, episode_id: str = ""
) -> Trajectory:
    """Runs ``task`` to termination or ``task.max_steps`` and returns its Trajectory (never raises InfraError or TaskError)."""
    episode_id = episode_id or uuid.uuid4().hex
    turns: list[Turn] = []
    version = 0
    overflow = ""
    try:
        obs = await env.reset(task)
        for i in range(task.max_steps):
            t0 = time.perf_counter()
            try:
                out = await policy.act(task, obs, i, episode_id)
            except ContextOverflowError as exc:  # the model cannot read more: score the episode as it stands
                overflow = str(exc)
                break
            d = out if isinstance(out, Decision) else Decision(out)
            version = max(version, d.policy_version)
            t1 = time.perf_counter()
            result = await env.step(d.text)
            t2 = time.perf_counter()
            turns.append(
                Turn(
                    index=i,
                    action_text=d.text,
                    action=_parsed(d.text),
                    parse_error=result.observation.last_action_error,
                    prompt_ids=d.prompt_ids,
                    response_ids=d.response_ids,
                    logprobs=d.logprobs,
                    screenshot=obs.screenshot if keep_screenshots else b"",
                    timings={
                        "policy_s": t1 - t0,
                        "env_s": t2 - t1,
                        "cached_tokens": float(d.num_cached_tokens),
                    },
                    a11y=obs.a11y,
                    prompt_text=d.prompt_text,
                    prompt_continued=d.prompt_continued,
                    response_text=d.response_text or d.text,
                    constraint=d.constraint,
                    policy_version=d.policy_version,
                )
            )
            obs = result.observation
            if result.done:
                break
        reward = await env.evaluate()
    except (InfraError, TaskError) as exc:
        return unscored(task, exc, tuple(turns), episode_id, version)
    finally:
        end = getattr(policy, "end_episode", None)
        if end is not None:
            end(episode_id)
    return Trajectory(
        episode_id, task.id, obs.platform, tuple(turns), reward, error=overflow, policy_version=version
    )
