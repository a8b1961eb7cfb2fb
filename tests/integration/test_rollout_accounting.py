"""run_rollouts accounts for every episode: a raising verifier, a lease that never comes, a rollout task
whose worker dies. Each case: every work item comes back exactly once, and the other episodes are kept."""

from __future__ import annotations

import pytest

from maigym_ray.config import PolicyConfig
from maigym_ray.rollout import outcome_counts, run_rollouts
from maigym_ray.testing import fake_task
from maigym_ray.testing.drills import ROLLOUT_TASK, lost

pytestmark = pytest.mark.integration

BROKEN = {"name": "checks", "params": {"checks": [{"op": "answer"}]}}  # malformed: evaluate raises TaskError


async def test_a_raising_verifier_is_a_task_error_and_the_batch_goes_on(fake_env):
    make, _ = fake_env
    m = make()
    work = [(i, fake_task(f"t{i}", verifier=BROKEN if i == 2 else None), "web") for i in range(6)]
    done = await run_rollouts(
        m, work, PolicyConfig(kind="golden"), None, concurrency=3, task_options=ROLLOUT_TASK
    )
    assert lost(work, done) == 0
    assert outcome_counts(done) == {"success": 5, "failure": 0, "task_error": 1, "infra_failed": 0}
    bad = next(f for f in done if f.item == 2)
    assert bad.attempt == 0 and bad.trajectory.turns  # not retried; the turns that ran are kept
    assert bad.trajectory.infra_failed and bad.trajectory.error.startswith("TaskError")


async def test_an_acquire_timeout_fails_only_its_episodes(fake_env, ray_local):
    make, _ = fake_env
    m = make(platforms=("web", "mobile_web"), request_timeout_s=1.0)
    held = await m.request.remote(
        4, "mobile_web", 30.0
    )  # every mobile_web instance is taken: its leases time out
    try:
        work = [(i, fake_task(f"t{i}", platform="web"), "web") for i in range(4)]
        work += [(i, fake_task(f"t{i}", platform="mobile_web"), "mobile_web") for i in range(4, 6)]
        done = await run_rollouts(
            m,
            work,
            PolicyConfig(kind="golden"),
            None,
            concurrency=3,
            infra_retries=1,
            task_options=ROLLOUT_TASK,
        )
    finally:
        for lease in held:
            await m.release.remote(lease)
    assert lost(work, done) == 0
    assert outcome_counts(done) == {"success": 4, "failure": 0, "task_error": 0, "infra_failed": 2}
    for f in done:
        if f.platform == "mobile_web":
            assert (
                f.attempt == 1 and "EnvUnavailableError" in f.trajectory.error
            )  # retried once, then recorded


async def test_an_episode_past_its_deadline_is_infra_failed_and_retried(fake_env):
    make, faults = fake_env
    m = make(reset_timeout_s=30.0)  # the manager would wait; the batch's episode deadline fires first
    from maigym_ray.testing import plant_fault

    plant_fault(faults, "reset", "hang")
    work = [(i, fake_task(f"t{i}"), "web") for i in range(4)]
    done = await run_rollouts(
        m,
        work,
        PolicyConfig(kind="golden"),
        None,
        concurrency=2,
        infra_retries=1,
        episode_timeout_s=3.0,
        task_options=ROLLOUT_TASK,
    )
    assert lost(work, done) == 0
    assert outcome_counts(done)["success"] == 4
    assert sorted(f.attempt for f in done) == [0, 0, 0, 1]
    assert not any(
        i["leased"] for i in await m.instances.remote()
    )  # the timed-out episode released its lease
