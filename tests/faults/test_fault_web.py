"""Fault drills on the real web backend: the shared Chromium killed under a running batch, and an app host
whose port is taken. Each: no episode lost, the run goes on."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket

import pytest

from maigym_ray.apps.host import AppHost
from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig
from maigym_ray.errors import BackendError
from maigym_ray.rollout import outcome_counts, run_rollouts
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.testing import fake_task, plant_fault
from maigym_ray.testing.drills import ROLLOUT_TASK, lost

pytestmark = pytest.mark.faults

TASKS = ["train-book-earliest", "food-two-margherita", "calendar-move-sync", "contacts-delete-plumber"]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
async def test_chromium_killed_under_a_batch(ray_local):
    from maigym_ray.envs.manager import EnvManager

    pool = TaskPool.builtin()
    cfg = EnvManagerConfig(
        pools={"web": PoolConfig(target_size=2, max_size=3, options={"browser": "shared"})},
        health_interval_s=0.5,
        reset_timeout_s=20.0,
        step_timeout_s=10.0,
    )
    m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg, pool)
    await m.start.remote(wait=True)
    try:
        work = [(i, pool.get(TASKS[i % len(TASKS)]), "web") for i in range(6)]
        killed: list[int] = []

        async def kill_chromium() -> None:
            while not killed:
                if any(i["leased"] for i in await m.instances.remote()):
                    await asyncio.sleep(0.3)
                    pid = (await m.service_pids.remote())["browser"]
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                await asyncio.sleep(0.05)

        killer = asyncio.ensure_future(kill_chromium())
        done = await run_rollouts(
            m,
            work,
            PolicyConfig(kind="golden"),
            None,
            concurrency=2,
            infra_retries=3,
            task_options=ROLLOUT_TASK,
        )
        await killer
        assert killed and lost(work, done) == 0
        assert outcome_counts(done)["success"] == 6  # episodes under the dead browser were retried
        assert (await m.service_pids.remote())["browser"] not in killed  # a fresh Chromium serves now
    finally:
        await m.shutdown.remote()
        ray_local.kill(m)


async def test_an_app_port_in_use_is_a_clear_backend_error():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        host = AppHost(["notes"], port=port)
        with pytest.raises(BackendError, match=f"cannot listen on 127.0.0.1:{port}"):
            await host.start()
        host.port = 0  # the same host recovers on a free port
        assert (await host.start()).startswith("http://127.0.0.1:")
        await host.stop()
    finally:
        taken.close()


async def test_instance_starts_that_fail_are_replaced_and_the_batch_goes_on(fake_env):
    make, faults = fake_env
    plant_fault(faults, "start", "error")  # what a port collision at start looks like to the manager
    m = make()  # the warm-up retries the failed start with a fresh actor
    plant_fault(faults, "health", "error")  # then an idle instance whose apps stop answering
    work = [(i, fake_task(f"t{i}"), "web") for i in range(6)]
    done = await run_rollouts(
        m, work, PolicyConfig(kind="golden"), None, concurrency=3, task_options=ROLLOUT_TASK
    )
    assert lost(work, done) == 0 and outcome_counts(done)["success"] == 6
    counters = (await m.metrics.remote())["counters"]
    assert counters["start_failures"] == 1 and not (faults / "start.error").exists()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
async def test_a_sigkilled_env_actor_leaves_no_namespace_or_page_behind(ray_local):
    """An env actor killed by a signal never closes its app namespace or its page in the shared browser; the
    manager reclaims both when it replaces the instance (each held a server, its sockets and a context)."""
    from maigym_ray.envs.manager import EnvManager

    cfg = EnvManagerConfig(
        pools={"web": PoolConfig(target_size=2, max_size=2, options={"browser": "shared"})},
        health_interval_s=0.3,
    )
    m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg, TaskPool.builtin())
    await m.start.remote(wait=True)
    try:
        assert await m.service_held.remote() == {"apps": 2, "browser": 2}
        for _ in range(2):  # twice: the replacement's own namespace is reclaimed too
            victim = (await m.instances.remote())[0]
            os.kill(victim["pid"], signal.SIGKILL)
            for _ in range(100):  # the health loop notices, replaces and the pool refills
                await asyncio.sleep(0.1)
                ids = [i["id"] for i in await m.instances.remote() if i["state"] == "idle"]
                if victim["id"] not in ids and len(ids) == 2:
                    break
            await m.wait_ready.remote(30)
        for _ in range(50):  # the release is fire-and-forget: give it a moment
            if await m.service_held.remote() == {"apps": 2, "browser": 2}:
                break
            await asyncio.sleep(0.1)
        assert await m.service_held.remote() == {"apps": 2, "browser": 2}
    finally:
        await m.shutdown.remote()
        ray_local.kill(m)
