"""Fault drills on the fake backend and scripted engines: an env actor killed mid-step, a reset that hangs,
engines that die or hang mid-rollout, verifiers that raise, hang or fork. Each: no episode lost, the run goes on."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from maigym_ray.config import PolicyConfig
from maigym_ray.rollout import outcome_counts, run_rollouts
from maigym_ray.testing import ScriptedEngine, fake_task, plant_fault
from maigym_ray.testing.drills import ROLLOUT_TASK, lost, scripted_policy, scripted_replies

pytestmark = pytest.mark.faults

GOLDEN = PolicyConfig(kind="golden")


def batch(n: int, **task) -> list:
    return [(i, fake_task(f"t{i}", **task), "web") for i in range(n)]


async def test_env_actor_killed_mid_step(fake_env):
    make, _ = fake_env
    m = make(delay_s=0.3)  # every reset and step takes 0.3 s: a kill lands inside one
    work = batch(6)
    killed: list[int] = []

    async def kill_a_busy_actor() -> None:
        while not killed:
            busy = [i for i in await m.instances.remote() if i["leased"] and i["pid"]]
            if busy:
                await asyncio.sleep(0.4)  # past the reset, into the steps
                os.kill(busy[0]["pid"], signal.SIGKILL)
                killed.append(busy[0]["pid"])
            await asyncio.sleep(0.05)

    killer = asyncio.ensure_future(kill_a_busy_actor())
    done = await run_rollouts(
        m, work, GOLDEN, None, concurrency=3, infra_retries=2, task_options=ROLLOUT_TASK
    )
    await killer
    assert killed and lost(work, done) == 0
    assert outcome_counts(done)["success"] == 6  # the killed episode was retried on a fresh instance
    assert max(f.attempt for f in done) == 1
    assert (await m.metrics.remote())["counters"]["replaced"] >= 1


async def test_a_reset_that_hangs(fake_env):
    make, faults = fake_env
    m = make()
    plant_fault(faults, "reset", "hang")
    work = batch(4)
    done = await run_rollouts(
        m, work, GOLDEN, None, concurrency=2, infra_retries=1, task_options=ROLLOUT_TASK
    )
    assert lost(work, done) == 0 and outcome_counts(done)["success"] == 4
    assert (await m.metrics.remote())["counters"].get("timeouts:reset") == 1


def _engines(ray_local, n: int, **first) -> list:
    replies = scripted_replies()
    return [
        ray_local.remote(ScriptedEngine).options(num_cpus=0).remote(replies, i, **(first if i == 0 else {}))
        for i in range(n)
    ]


# A healthy scripted engine answers in milliseconds, but a loaded CI machine can stall one for a second: only the
# hang case needs a short generate timeout. With 12 episodes, engine 0 gets none (and never dies) 1 time in 4096.
@pytest.mark.parametrize(("fault", "timeout_s"), [("die_after", 30.0), ("hang_after", 5.0)])
async def test_an_engine_that_dies_or_hangs_mid_rollout(fake_env, ray_local, fault, timeout_s):
    make, _ = fake_env
    m = make()
    engines = _engines(ray_local, 2, **{fault: 1})  # engine 0's 2nd generate: mid-episode (2 per episode)
    # Started before the batch, as a session starts its engines: otherwise an engine's first generate includes
    # its worker's start-up, which on a loaded CI machine ran past the timeout and failed a healthy engine.
    await asyncio.gather(*(e.start.remote() for e in engines))
    work = batch(12)
    done = await run_rollouts(
        m,
        work,
        scripted_policy(generate_timeout_s=timeout_s),
        engines,
        concurrency=3,
        task_options=ROLLOUT_TASK,
    )
    assert lost(work, done) == 0
    assert outcome_counts(done)["success"] == 12
    assert all(f.attempt == 0 for f in done), [
        (f.attempt, f.trajectory.error) for f in done
    ]  # no retry: the router moved the episode to the live engine
    if fault == "die_after":
        with pytest.raises(ray_local.exceptions.RayActorError):
            await engines[0].start.remote()
    for e in engines:
        ray_local.kill(e)


async def test_every_engine_dead_marks_episodes_infra_failed_not_zero(fake_env, ray_local):
    make, _ = fake_env
    m = make()
    engines = [ray_local.remote(ScriptedEngine).options(num_cpus=0).remote(scripted_replies(), die_after=0)]
    work = batch(3)
    done = await run_rollouts(
        m, work, scripted_policy(), engines, concurrency=3, infra_retries=1, task_options=ROLLOUT_TASK
    )
    assert lost(work, done) == 0
    assert outcome_counts(done) == {"success": 0, "failure": 0, "task_error": 0, "infra_failed": 3}
    assert all("no live engine" in f.trajectory.error for f in done)


@pytest.mark.parametrize(
    "body",
    [
        "def verify(states, answer):\n    raise ValueError('boom')",
        "def verify(states, answer):\n    while True:\n        pass",
    ],
    ids=["raises", "hangs"],
)
async def test_a_code_verifier_that_raises_or_hangs(fake_env, body):
    make, _ = fake_env
    m = make()
    code = {"name": "code", "params": {"code": body, "timeout_s": 1.0}}
    work = [(i, fake_task(f"t{i}", verifier=code if i == 0 else None), "web") for i in range(4)]
    done = await run_rollouts(m, work, GOLDEN, None, concurrency=2, task_options=ROLLOUT_TASK)
    assert lost(work, done) == 0
    assert outcome_counts(done) == {"success": 3, "failure": 0, "task_error": 1, "infra_failed": 0}


# Reaches os the way an escaping verifier would (the jail's Python has no import for it), forks three children,
# each of which starts a detached grandchild (new session, stdout still open) that would sleep for a minute,
# then either spins past the deadline or returns 0.0 a little later.
FORKS = """
def _os():
    for c in ().__class__.__mro__[1].__subclasses__():
        if c.__name__ == "BuiltinImporter":
            return c.load_module("posix")

def verify(states, answer):
    os = _os()
    for _ in range(3):
        if os.fork() == 0:
            if os.fork() == 0:
                os.setsid()
                os.execv("/bin/sleep", ["sleep", "61.803"])
            os._exit(0)
    THEN
"""
FORK_MARKER = b"61.803"


def _forked() -> list[int]:
    """Pids of the drill's grandchildren (their command line carries the marker)."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and FORK_MARKER in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
        except OSError:
            pass
    return out


@pytest.mark.parametrize(
    ("then", "timeout_s", "outcome"),
    [
        # forks, then hangs: the deadline ends it (3 s: on a loaded machine the jail takes ~1 s to start)
        ("while True:\n        pass", 3.0, "task_error"),
        ("for _ in range(20000000):\n        pass\n    return 0.0", 8.0, "failure"),  # forks, then a verdict
    ],
    ids=["forks-then-hangs", "forks-then-returns"],
)
async def test_a_code_verifier_that_forks(fake_env, then, timeout_s, outcome):
    make, _ = fake_env
    m = make()
    code = {"name": "code", "params": {"code": FORKS.replace("THEN", then), "timeout_s": timeout_s}}
    work = [(i, fake_task(f"t{i}", verifier=code if i == 0 else None), "web") for i in range(4)]
    seen: set[int] = set()

    async def watch() -> None:  # the grandchildren did start (else the drill would pass for nothing)
        while True:
            seen.update(_forked())
            await asyncio.sleep(0.02)

    watcher = asyncio.ensure_future(watch())
    t0 = time.monotonic()
    try:
        done = await run_rollouts(m, work, GOLDEN, None, concurrency=2, task_options=ROLLOUT_TASK)
    finally:
        watcher.cancel()
    assert time.monotonic() - t0 < timeout_s + 15  # within the deadline, not the grandchildren's minute
    assert lost(work, done) == 0
    assert outcome_counts(done) == {
        "success": 3,
        "failure": int(outcome == "failure"),
        "task_error": int(outcome == "task_error"),
        "infra_failed": 0,
    }
    assert seen, "the verifier's grandchildren never started"
    await asyncio.sleep(0.2)
    assert not _forked(), "a forked verifier child outlived its episode"
