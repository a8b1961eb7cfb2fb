"""The RL simulation at scale (maigym_ray/testing/rl_sim.py): the driver's own pool on simulated time.

On a small shape (64 GPUs, 2,000 environments) it must show what the real loop does: the synchronous arm's
trainer idles through every rollout and its engines through every update, the asynchronous arm overlaps them;
no group trains past the staleness bound; and simulated time is free (an hour of it in well under a minute).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.testing.rl_sim import RLSim, SimRun
from maigym_ray.testing.virtual_time import run_virtual

pytestmark = pytest.mark.unit


def test_virtual_time_jumps_to_the_next_timer():
    async def main() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.gather(asyncio.sleep(3600.0), asyncio.sleep(10.0))
        return loop.time()

    t0 = time.perf_counter()
    assert run_virtual(main()) == pytest.approx(3600.0)
    assert time.perf_counter() - t0 < 1.0


def test_a_simulation_that_waits_on_nothing_says_so():
    async def main() -> None:
        await asyncio.get_running_loop().create_future()  # nothing will ever set it

    with pytest.raises(RuntimeError, match="waits on nothing"):
        run_virtual(main())


def test_async_overlaps_what_sync_serialises_at_a_small_shape():
    shape = {"gpus": 64, "environments": 2000, "groups_per_update": 128, "updates": 2, "trainer_gpus": 50}
    sync = RLSim(SimRun(max_staleness=0, **shape)).run()
    asyn = RLSim(SimRun(max_staleness=4, **shape)).run()
    assert sync.mean_staleness == 0 and sync.stale_groups == 0
    assert 0 < asyn.mean_staleness <= 4
    assert asyn.gpu_idle_share < sync.gpu_idle_share - 0.2
    assert asyn.episodes_per_hour > 1.5 * sync.episodes_per_hour
    assert asyn.groups_taken == 2 * 128 + asyn.stale_groups
    with pytest.raises(ConfigError, match="trainer_gpus"):
        SimRun(trainer_gpus=64, gpus=64)
