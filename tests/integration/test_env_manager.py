"""The EnvManager on a local Ray with real Chromium: leases, the five operations, failure and recovery."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.errors import (
    ConfigError,
    EnvTimeoutError,
    EnvUnavailableError,
    InfraError,
    LeaseError,
    TaskError,
)
from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.policy import GoldenPolicy
from maigym_ray.tasks.pool import TaskPool

pytestmark = pytest.mark.integration

TASKS = ["train-book-earliest", "food-two-margherita", "calendar-move-sync", "contacts-delete-plumber"]


@pytest.fixture(scope="module")
def manager(ray_local):
    from maigym_ray.envs.manager import EnvManager

    cfg = EnvManagerConfig(
        pools={"web": PoolConfig(target_size=4, max_size=6, recycle_after=3, options={"browser": "shared"})},
        health_interval_s=0.5,
    )
    m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg, TaskPool.builtin())
    ray_local.get(m.start.remote(wait=True), timeout=180)
    yield m
    ray_local.get(m.shutdown.remote(), timeout=60)
    ray_local.kill(m)


async def wait_for(cond, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.2)


async def pool_idle(m, n: int = 4) -> bool:
    return (await m.metrics.remote())["pools"]["web"]["idle"] >= n


async def test_four_leases_golden_solutions_and_exact_reset(manager):
    pool = TaskPool.builtin()
    leases = await manager.request.remote(4, "web")
    assert len(set(leases)) == 4

    async def run(lease: str, task_id: str) -> None:
        task = pool.get(task_id)
        obs = await manager.reset.remote(lease, task_id)
        assert obs.app == task.start_app and obs.screenshot.startswith(b"\x89PNG")
        initial = await manager.state.remote(lease)
        assert (await manager.evaluate.remote(lease)).value == 0.0
        for g in task.golden:
            res = await manager.step.remote(lease, g)
            assert res.observation.last_action_error == "", (task_id, g, res.observation.last_action_error)
        reward = await manager.evaluate.remote(lease)
        assert reward.value == 1.0 and reward.success, (task_id, reward)
        assert await manager.state.remote(lease) != initial
        await manager.reset.remote(lease, task_id)
        assert await manager.state.remote(lease) == initial  # byte-for-byte the initial app state
        assert (await manager.evaluate.remote(lease)).value == 0.0

    try:
        await asyncio.gather(*(run(lease, t) for lease, t in zip(leases, TASKS, strict=True)))
        instances = {i["id"] for i in await manager.instances.remote() if i["leased"]}
        assert len(instances) == 4  # four different instances, never shared
    finally:
        for lease in leases:
            await manager.release.remote(lease)


async def test_bad_input_is_an_observation_or_a_clear_error(manager):
    (lease,) = await manager.request.remote(1, "web")
    try:
        await manager.reset.remote(lease, "mail-archive-invoice")
        res = await manager.step.remote(lease, "swipe(from_x=1, from_y=1, to_x=2, to_y=2)")
        assert "not supported on web" in res.observation.last_action_error
        res = await manager.step.remote(lease, "__import__('os').system('touch /tmp/pwned')")
        assert res.observation.last_action_error and not os.path.exists("/tmp/pwned")
        assert res.info["steps"] == 2 and not res.done  # mistakes cost a step, nothing crashed
        res = await manager.step.remote(lease, 'click(id="msg-m1")')
        assert res.observation.last_action_error == "" and "Invoice November" in res.observation.a11y
        with pytest.raises(TaskError, match="unknown task"):
            await manager.reset.remote(lease, "no-such-task")
        with pytest.raises(ConfigError, match="configured platforms: web"):
            await manager.request.remote(1, "android")
    finally:
        await manager.release.remote(lease)
    with pytest.raises(LeaseError):
        await manager.step.remote(lease, "wait()")


async def test_killed_actor_mid_episode_is_infra_failure_and_replaced(manager, ray_local):
    from maigym_ray.envs.lease import LeasedEnv

    await wait_for(lambda: pool_idle(manager))
    task = TaskPool.builtin().get("train-book-earliest")
    env = await LeasedEnv.acquire(manager, "web")

    class KillMidway(GoldenPolicy):
        async def act(self, task, observation, step, episode_id=""):
            if step == 3:
                ray_local.kill(await manager.actor.remote(env.lease))
            return await super().act(task, observation, step, episode_id)

    traj = await run_episode(env, task, KillMidway())
    await env.release()
    assert traj.infra_failed and traj.reward.infra_failed and not traj.reward.success
    assert "EnvUnavailableError" in traj.error
    assert len(traj.turns) == 3
    await wait_for(lambda: pool_idle(manager))
    counters = (await manager.metrics.remote())["counters"]
    assert counters.get("replaced", 0) >= 1
    env = await LeasedEnv.acquire(manager, "web")  # a fresh instance runs the task to success
    traj = await run_episode(env, task, GoldenPolicy())
    await env.release()
    assert traj.reward.success and not traj.infra_failed


async def test_killed_chromium_recovers(manager):
    await wait_for(lambda: pool_idle(manager))
    pids = await manager.service_pids.remote()
    assert pids["browser"] > 0
    (lease,) = await manager.request.remote(1, "web")
    await manager.reset.remote(lease, "mail-archive-invoice")
    os.kill(pids["browser"], signal.SIGKILL)
    with pytest.raises(InfraError):
        for _ in range(3):
            await manager.step.remote(lease, 'click(id="msg-m1")')
            await asyncio.sleep(0.2)
    await manager.release.remote(lease)
    await wait_for(lambda: pool_idle(manager), timeout_s=90)
    new_pids = await manager.service_pids.remote()
    assert new_pids["browser"] not in (0, pids["browser"])
    (lease,) = await manager.request.remote(1, "web")
    try:
        await manager.reset.remote(lease, "mail-archive-invoice")
        for g in TaskPool.builtin().get("mail-archive-invoice").golden:
            await manager.step.remote(lease, g)
        assert (await manager.evaluate.remote(lease)).success
    finally:
        await manager.release.remote(lease)


async def test_recycling_and_metrics(manager):
    await wait_for(lambda: pool_idle(manager))
    before = (await manager.metrics.remote())["counters"].get("recycled", 0)
    (lease,) = await manager.request.remote(1, "web")
    for _ in range(3):  # recycle_after=3
        await manager.reset.remote(lease, "calendar-design-start")
    await manager.release.remote(lease)
    m = await manager.metrics.remote()
    assert m["counters"]["recycled"] == before + 1
    assert {"reset", "step", "evaluate", "request"} <= set(m["latency"])
    assert m["latency"]["reset"]["count"] >= 3 and m["latency"]["reset"]["p50_s"] > 0
    assert set(m["pools"]["web"]) >= {"idle", "busy", "starting", "size"}


async def test_step_timeout_is_infra_error_and_instance_replaced(manager):
    from maigym_ray.envs.lease import LeasedEnv

    await wait_for(lambda: pool_idle(manager))
    before = (await manager.metrics.remote())["counters"].get("replaced", 0)
    (lease,) = await manager.request.remote(1, "web")
    env = LeasedEnv(manager, lease, step_timeout_s=0.5)
    await env.reset(TaskPool.builtin().get("mail-archive-invoice"))
    with pytest.raises(EnvTimeoutError):
        await env.step("wait(seconds=2)")
    with pytest.raises(EnvUnavailableError):  # the lease now points at a replaced instance
        await manager.observe.remote(lease)
    await env.release()
    assert (await manager.metrics.remote())["counters"]["replaced"] == before + 1
    await wait_for(lambda: pool_idle(manager))
