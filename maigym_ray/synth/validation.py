"""Validation on a live instance: the gate every synthesised task passes before it enters a pool.

For one task on one leased environment:

1. reset to the task and snapshot the state; the verifier must give 0 (``verifier_passes_initial_state``);
2. replay the golden solution action by action; an action the screen refuses is ``golden_action_failed``;
3. the verifier must now give 1 (``golden_misses_goal``);
4. reset again: the state must equal the first snapshot, compared by hash (``reset_not_equal``).

A task file error (a bad seed) is ``bad_task``; a verifier that raises, or hangs and is killed by the
jail, is ``verifier_error``. Infrastructure failures (a crashed browser, a dead actor, a
timeout) are not verdicts on the task: :func:`validate_all` retries the task on a fresh lease and, if it still
fails, reports it as ``infra_failure``, kept apart from the rejections. Plain Python over the
:class:`~maigym_ray.types.EnvHandle` protocol; ``runtime/synthesis.py`` leases ``envs/lease.LeasedEnv``s.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import InfraError, TaskError
from maigym_ray.types import EnvHandle, TaskSpec


@dataclass(frozen=True)
class Verdict:
    """The outcome for one task: ``ok``, or the reason (a short category) and its detail."""

    task_id: str
    ok: bool
    reason: str = ""
    detail: str = ""
    seconds: float = 0.0
    #: each golden action's round trip as the validator saw it (steps go straight to the instance's actor, so the
    #: manager's latency metrics do not see them)
    step_seconds: tuple[float, ...] = ()


def state_hash(state: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of an environment's state."""
    return hashlib.sha256(json.dumps(state, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


async def validate(env: EnvHandle, task: TaskSpec) -> Verdict:
    """Runs the four checks on ``env``. Raises :class:`InfraError` (and subclasses) for infrastructure failures."""
    t0 = time.perf_counter()

    steps: list[float] = []

    def verdict(reason: str = "", detail: str = "") -> Verdict:
        return Verdict(task.id, not reason, reason, detail, time.perf_counter() - t0, tuple(steps))

    try:
        await env.reset(task)
    except TaskError as exc:
        return verdict("bad_task", str(exc))
    before = await env.state()
    try:
        r0 = await env.evaluate()
    except TaskError as exc:  # a verifier that raises, hangs (killed by the sandbox) or is malformed
        return verdict("verifier_error", str(exc))
    if r0.success:
        return verdict("verifier_passes_initial_state", r0.reason)
    for i, act in enumerate(task.golden):
        t_step = time.perf_counter()
        res = await env.step(act)
        steps.append(time.perf_counter() - t_step)
        if res.observation.last_action_error:
            return verdict("golden_action_failed", f"action {i} {act}: {res.observation.last_action_error}")
    try:
        r1 = await env.evaluate()
    except TaskError as exc:
        return verdict("verifier_error", str(exc))
    if not r1.success:
        return verdict("golden_misses_goal", r1.reason)
    await env.reset(task)
    if state_hash(await env.state()) != state_hash(before):
        return verdict("reset_not_equal", "the state after a second reset differs from the first")
    return verdict()


async def validate_all(
    tasks: Sequence[TaskSpec],
    lease: Callable[[], Awaitable[EnvHandle]],
    release: Callable[[EnvHandle, bool], Awaitable[None]],
    concurrency: int,
    retries: int = 1,
    on_verdict: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Validates ``tasks`` with ``concurrency`` workers, each holding one leased env.

    ``lease()`` gives an env; ``release(env, broken)`` returns it (``broken``: an infrastructure failure
    happened on it, so the caller should replace it). A task that hits an infrastructure failure is retried up
    to ``retries`` times on a fresh lease, then reported as ``infra_failure``. Verdicts come back in task order.
    """
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(tasks)):
        queue.put_nowait(i)
    verdicts: list[Verdict | None] = [None] * len(tasks)

    async def worker() -> None:
        env: EnvHandle | None = await lease()
        try:
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                for attempt in range(retries + 1):
                    try:
                        v = await validate(env, tasks[i])  # type: ignore[arg-type]
                        break
                    except (InfraError, TimeoutError) as exc:
                        broken, env = env, None  # released once, as broken; never again in `finally`
                        await release(broken, True)  # type: ignore[arg-type]
                        env = await lease()
                        v = Verdict(tasks[i].id, False, "infra_failure", f"{type(exc).__name__}: {exc}")
                        if attempt == retries:
                            break
                verdicts[i] = v
                if on_verdict is not None:
                    on_verdict(v)
        finally:
            if env is not None:
                await release(env, False)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(tasks))))))
    return [v for v in verdicts if v is not None]
