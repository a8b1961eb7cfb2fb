"""EnvActor episode logic, run_episode accounting, the router's failover and the fakes themselves, all on
the scripted fakes of maigym_ray.testing: no browser, no Ray, seconds."""

from __future__ import annotations

import asyncio

import pytest

from maigym_ray.config import PoolConfig
from maigym_ray.envs.actor import EnvActor
from maigym_ray.errors import BackendError, InfraError, TaskError
from maigym_ray.generation import SamplingConfig
from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.policy import GoldenPolicy
from maigym_ray.policy.router import EngineRouter
from maigym_ray.testing import FakeBackend, ScriptedEngine, fake_task, plant_fault
from maigym_ray.testing.fake_backend import FakeBackendConfig

pytestmark = pytest.mark.unit


async def started_actor(**fake) -> EnvActor:
    actor = EnvActor()
    info = await actor.start("fake-0", PoolConfig(backend="fake", options=fake), [])
    assert info["platform"] == "web"
    return actor


async def test_env_actor_episode_steps_answer_terminate_and_verdict():
    actor = await started_actor()
    obs = await actor.reset(fake_task(answer="42"))
    assert (
        obs.a11y == "[1] button 'Next'" and obs.screenshot.startswith(b"\x89PNG") and "reset_s" in obs.timings
    )
    r = await actor.step('click(id="1")')
    assert not r.done and r.info["steps"] == 1 and r.observation.a11y == "[1] button 'Done'"
    r = await actor.step("this is not an action")  # an agent mistake: an observation that costs a step
    assert r.observation.last_action_error and r.info["steps"] == 2 and not r.done
    r = await actor.step('answer(text="42")')
    assert r.info["answer"] == "42" and not r.done
    r = await actor.step('terminate(status="success")')
    assert r.done and not r.info["truncated"]
    after = await actor.step('click(id="1")')
    assert after.done and after.info["error"] == "the episode is over" and after.info["steps"] == 4
    reward = await actor.evaluate()
    assert reward.success and reward.value == 1.0
    state = await actor.state()
    assert state["fake"]["clicks"] == 1 and state["fake"]["actions"][0] == 'click(id="1")'


async def test_env_actor_truncates_at_max_steps_and_wrong_answer_scores_zero():
    actor = await started_actor()
    await actor.reset(fake_task(answer="42", max_steps=2))
    await actor.step('answer(text="41")')
    r = await actor.step('click(id="1")')
    assert r.done and r.info["truncated"]
    reward = await actor.evaluate()
    assert not reward.success and reward.value == 0.0


async def test_env_actor_reset_clears_the_episode_and_counts_it():
    actor = await started_actor()
    await actor.reset(fake_task())
    await actor.step('answer(text="42")')
    await actor.reset(fake_task())
    assert actor.episodes == 2 and actor.steps == 0 and actor.answer is None
    assert (await actor.state())["fake"]["actions"] == []


async def test_env_actor_task_errors_and_backend_errors():
    actor = await started_actor()
    with pytest.raises(TaskError):
        await actor.step('click(id="1")')  # step before reset
    with pytest.raises(TaskError):
        await actor.reset(fake_task(platform="android"))  # the task does not run here
    await actor.reset(fake_task(verifier={"name": "no-such-verifier"}))
    with pytest.raises(TaskError):
        await actor.evaluate()
    actor.backend.inject("act", "error")
    with pytest.raises(BackendError):
        await actor.step('click(id="1")')
    assert await actor.health()
    actor.backend.inject("health", "error")
    assert not await actor.health()


async def test_fake_faults_hang_and_a_planted_fault_is_claimed_once(tmp_path):
    a, b = (
        FakeBackend(FakeBackendConfig(faults_dir=str(tmp_path))),
        FakeBackend(FakeBackendConfig(faults_dir=str(tmp_path))),
    )
    await a.start()
    await b.start()
    a.inject("observe", "hang")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(a.observe(), 0.2)
    plant_fault(tmp_path, "reset", "error")
    results = await asyncio.gather(a.reset(fake_task()), b.reset(fake_task()), return_exceptions=True)
    assert sum(isinstance(r, BackendError) for r in results) == 1
    await a.reset(fake_task())  # consumed: nothing left
    with pytest.raises(ValueError):
        plant_fault(tmp_path, "reset", "explode")
    await a.close()
    with pytest.raises(BackendError):
        await a.observe()
    assert not await a.health()


async def test_run_episode_records_a_raising_verifier_as_task_error_and_keeps_turns():
    actor = await started_actor()
    traj = await run_episode(
        actor, fake_task(verifier={"name": "checks", "params": {"checks": []}}), GoldenPolicy()
    )
    assert traj.outcome == "task_error" and traj.infra_failed and len(traj.turns) == 3
    assert traj.error.startswith("TaskError") and traj.reward.value == 0.0
    ok = await run_episode(actor, fake_task(), GoldenPolicy())
    assert ok.outcome == "success"


async def test_run_episode_records_a_backend_failure_as_infra_failed():
    actor = await started_actor()
    actor.backend.inject("act", "error")
    traj = await run_episode(actor, fake_task(), GoldenPolicy())
    assert traj.outcome == "infra_failed" and traj.error.startswith("BackendError")


class _Remote:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args):
        return self.fn(*args)


class _Handle:
    """A ScriptedEngine seen through a Ray-like handle (``engine.generate.remote(...)``)."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine
        self.generate = _Remote(engine.generate)


async def test_router_moves_the_episode_off_a_hung_engine_then_off_a_dead_one():
    engines = [ScriptedEngine([[i, i]], engine_id=i) for i in range(3)]
    router = EngineRouter([_Handle(e) for e in engines], "sticky", timeout_s=0.2)
    first = router.pick("ep")
    engines[first].hang_after = engines[first].calls  # its next generate never returns
    gen = await router.generate([1, 2], [], SamplingConfig(), "ep")
    assert first in router.failed and gen.response_ids[0] != first and len(gen.logprobs) == 2
    second = router.pick("ep")

    async def dead(*_):
        raise InfraError("engine died")

    router.engines[second].generate = _Remote(dead)
    gen = await router.generate([1], [], SamplingConfig(), "ep")
    assert router.failed == {first, second} and gen.response_ids[0] not in (first, second)
    router.failed = {0, 1, 2}
    with pytest.raises(InfraError, match="no live engine"):
        await router.generate([1], [], SamplingConfig(), "ep")


async def test_scripted_engine_cycles_replies_per_episode():
    e = ScriptedEngine([[1, 2, 3], [4]])
    s = SamplingConfig(max_tokens=2)
    assert (await e.generate([9], [], s, "a")).response_ids == (1, 2)
    assert (await e.generate([9], [], s, "a")).response_ids == (4,)
    assert (await e.generate([9], [], s, "b")).response_ids == (1, 2)
    assert (await e.prefix_cache_stats())["queries"] == 3
