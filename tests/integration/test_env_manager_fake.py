"""The EnvManager on a local Ray with the fake backend: leasing, replacement of a failed instance, and
recycling after N episodes. The fake needs no browser, so these run in seconds once Ray is up."""

from __future__ import annotations

import asyncio
import time

import pytest

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.errors import BackendError, EnvTimeoutError, EnvUnavailableError, InfraError
from maigym_ray.testing import fake_task, plant_fault

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fake_manager(ray_local, tmp_path_factory):
    from maigym_ray.envs.manager import EnvManager

    faults = tmp_path_factory.mktemp("faults")
    cfg = EnvManagerConfig(
        pools={
            "web": PoolConfig(
                backend="fake",
                target_size=2,
                max_size=3,
                recycle_after=3,
                options={"faults_dir": str(faults)},
            )
        },
        apps=["notes"],
        reset_timeout_s=2.0,
        step_timeout_s=2.0,
        health_interval_s=0.3,
        request_timeout_s=5.0,
    )
    m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg)
    ray_local.get(m.start.remote(wait=True), timeout=120)
    yield m, faults
    ray_local.get(m.shutdown.remote(), timeout=60)
    ray_local.kill(m)


async def idle(m, n: int = 2, timeout_s: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        insts = await m.instances.remote()
        if sum(1 for i in insts if i["state"] == "idle") >= n:
            return insts
        assert time.monotonic() < deadline, f"pool did not refill: {insts}"
        await asyncio.sleep(0.1)


async def test_leases_are_exclusive_and_released(fake_manager):
    m, _ = fake_manager
    await idle(m)
    a, b = await m.request.remote(2, "web")
    assert a != b
    await m.reset.remote(a, fake_task())
    r = await m.step.remote(a, 'answer(text="42")')
    assert r.info["answer"] == "42"
    assert (await m.evaluate.remote(a)).success
    with pytest.raises(EnvUnavailableError):  # max_size 3: only one more instance can exist
        await m.request.remote(2, "web", timeout_s=1.0)
    await m.release.remote(a)
    await m.release.remote(b)
    insts = await idle(m)
    assert not any(i["leased"] for i in insts)


@pytest.mark.parametrize(
    ("op", "kind", "error"),
    [
        ("reset", "error", BackendError),
        ("reset", "hang", EnvTimeoutError),
        ("act", "die", EnvUnavailableError),
    ],
)
async def test_a_failed_instance_is_replaced(fake_manager, op, kind, error):
    m, faults = fake_manager
    await idle(m)
    (lease,) = await m.request.remote(1, "web")
    before = {i["id"] for i in await m.instances.remote()}
    plant_fault(faults, op, kind)
    with pytest.raises(InfraError) as info:
        await m.reset.remote(lease, fake_task())
        await m.step.remote(lease, 'click(id="1")')
    assert isinstance(info.value, error)
    with pytest.raises(EnvUnavailableError):  # the lease now points at a replaced instance
        await m.observe.remote(lease)
    await m.release.remote(lease)
    insts = await idle(m)
    assert len(before - {i["id"] for i in insts}) == 1  # exactly the failed one is gone
    assert (await m.metrics.remote())["counters"]["replaced"] >= 1


async def test_an_instance_is_recycled_after_n_episodes(fake_manager):
    m, _ = fake_manager
    await idle(m)
    (lease,) = await m.request.remote(1, "web")
    iid = next(i["id"] for i in await m.instances.remote() if i["leased"])
    for _ in range(3):
        await m.reset.remote(lease, fake_task())
    await m.release.remote(lease)
    insts = await idle(m)
    assert iid not in {i["id"] for i in insts}
    assert (await m.metrics.remote())["counters"]["recycled"] >= 1


async def test_a_waiting_request_gets_the_next_released_instance(fake_manager):
    m, _ = fake_manager
    await idle(m)
    held = await m.request.remote(3, "web")  # max_size 3: the pool is now all busy
    waiting = m.request.remote(1, "web", timeout_s=10.0)
    await asyncio.sleep(0.5)
    await m.release.remote(held[0])
    (lease,) = await waiting  # the released instance (or, if due for recycling, its replacement)
    iids = {i["id"] for i in await m.instances.remote()}
    assert len(iids) == 3
    for other in (lease, *held[1:]):
        await m.release.remote(other)
    assert (await m.metrics.remote())["counters"]["queued"] >= 1
