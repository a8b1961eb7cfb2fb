"""Several instances per env actor process (PoolConfig.instances_per_actor, envs/group.py) on a local Ray with the
fake backend: each instance keeps its own episode, a failed one is replaced alone, a dead process takes all of
its instances and every one of them is replaced."""

from __future__ import annotations

import asyncio
import time

import pytest

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.envs.lease import LeasedEnv
from maigym_ray.errors import BackendError, EnvUnavailableError, InfraError
from maigym_ray.testing import fake_task, plant_fault

pytestmark = pytest.mark.integration

SIZE = 3


@pytest.fixture(scope="module")
def grouped(ray_local, tmp_path_factory):
    from maigym_ray.envs.manager import EnvManager

    faults = tmp_path_factory.mktemp("faults")
    pool = PoolConfig(
        backend="fake",
        target_size=SIZE,
        max_size=SIZE,
        recycle_after=0,
        instances_per_actor=SIZE,
        options={"faults_dir": str(faults)},
    )
    cfg = EnvManagerConfig(
        pools={"web": pool},
        apps=["notes"],
        reset_timeout_s=5.0,
        health_interval_s=0.3,
        request_timeout_s=10.0,
    )
    m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg)
    ray_local.get(m.start.remote(wait=True), timeout=120)
    yield m, faults
    ray_local.get(m.shutdown.remote(), timeout=60)
    ray_local.kill(m)


async def idle(m, timeout_s: float = 30.0, not_on: set[int] = frozenset()) -> list[dict]:
    """The pool's instances once ``SIZE`` of them are idle and none is hosted by a process in ``not_on``."""
    deadline = time.monotonic() + timeout_s
    while True:
        insts = await m.instances.remote()
        if sum(1 for i in insts if i["state"] == "idle" and i["pid"] not in not_on) == SIZE:
            return insts
        assert time.monotonic() < deadline, f"pool did not refill: {insts}"
        await asyncio.sleep(0.1)


async def test_instances_share_a_process_and_keep_their_own_episodes(grouped):
    m, _ = grouped
    insts = await idle(m)
    assert len({i["pid"] for i in insts}) == 1  # one process hosts the whole pool
    envs = [LeasedEnv(m, lease) for lease in await m.request.remote(SIZE, "web")]
    try:
        for e in envs:
            await e.reset(fake_task())
        # direct (data-plane) steps through each instance's handle: only the stepped instance moves on
        first = await envs[0].step('click(id="1")')
        assert "Done" in first.observation.a11y
        for e in envs[1:]:
            assert "Next" in (await m.observe.remote(e.lease)).a11y
        await envs[1].step('answer(text="42")')
        assert (await envs[1].evaluate()).success and not (await envs[2].evaluate()).success
    finally:
        for e in envs:
            await e.release()


async def test_a_failed_instance_is_replaced_alone(grouped):
    m, faults = grouped
    before = {i["id"]: i["pid"] for i in await idle(m)}
    (lease,) = await m.request.remote(1, "web")
    plant_fault(faults, "reset", "error")
    with pytest.raises(BackendError):
        await m.reset.remote(lease, fake_task())
    with pytest.raises(EnvUnavailableError):
        await m.observe.remote(lease)
    await m.release.remote(lease)
    after = {i["id"]: i["pid"] for i in await idle(m)}
    assert len(set(before) - set(after)) == 1  # exactly the failed one is gone
    assert set(after.values()) == set(before.values())  # its replacement joined the same process


async def test_a_dead_process_takes_its_instances_and_all_are_replaced(grouped):
    m, faults = grouped
    before = {i["id"]: i["pid"] for i in await idle(m)}
    (lease,) = await m.request.remote(1, "web")
    await m.reset.remote(lease, fake_task())
    plant_fault(faults, "act", "die")
    with pytest.raises(InfraError):
        await m.step.remote(lease, 'click(id="1")')
    await m.release.remote(lease)
    # the failed instance is replaced at once; the other two died with the process, and the health checks
    # (every 0.3 s) find and replace them: wait for that rather than for any three idle instances
    after = {i["id"]: i["pid"] for i in await idle(m, not_on=set(before.values()))}
    assert not set(before) & set(after)
    assert len(set(after.values())) == 1 and set(after.values()) != set(before.values())
