"""A suite's pool spec picks its backend kind for the run's pools, and the golden policy plays a suite's scripted
solution where a task has no fixed golden actions (what makes ``cli.eval tasks.pool=miniwob:... policy.kind=golden``
score the pages instead of failing every episode)."""

from __future__ import annotations

import pytest

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.envs.registry import kind_options
from maigym_ray.rollout import SuiteGoldenPolicy
from maigym_ray.runtime.pools import env_for_pool
from maigym_ray.suites.miniwob import miniwob_task
from maigym_ray.testing import fake_task
from maigym_ray.types import Element, Observation

pytestmark = pytest.mark.unit


def test_suite_pool_spec_switches_matching_pools_only():
    env = EnvManagerConfig(
        pools={"web": PoolConfig(target_size=3), "desk": PoolConfig(platform="desktop", backend="desktop")}
    )
    mw = env_for_pool(env, "miniwob:click-button")
    assert mw.pools["web"].backend == "miniwob" and mw.pools["web"].target_size == 3
    assert mw.pools["desk"].backend == "desktop"
    ow = env_for_pool(env, "osworld:examples/osworld_tasks")
    assert ow.pools["desk"].backend == "osworld" and ow.pools["web"].backend == "web"
    assert env_for_pool(env, "builtin") is env and env_for_pool(env, "/data/pool.parquet") is env


def test_miniwob_pools_take_the_suites_own_reset_unless_set_to_reload():
    env = EnvManagerConfig(pools={"web": PoolConfig(target_size=2)})

    def reset(env: EnvManagerConfig) -> str:
        return kind_options(env.pools["web"]).reset

    assert reset(env) == "context"
    assert reset(env_for_pool(env, "miniwob:click-button")) == "restart"
    assert reset(env_for_pool(env, "builtin")) == "context"
    reload = EnvManagerConfig(pools={"web": PoolConfig(options={"reset": "reload"})})
    assert reset(env_for_pool(reload, "miniwob:click-button")) == "reload"


async def test_golden_policy_plays_fixed_goldens_and_scripted_suites():
    policy = SuiteGoldenPolicy()
    task = fake_task()
    obs = Observation(platform="web", screenshot=b"", width=10, height=10, a11y="")
    assert await policy.act(task, obs, 0, "e1") == task.golden[0]
    page = Observation(
        platform="web",
        screenshot=b"",
        width=380,
        height=220,
        a11y='instruction "Click on the "ok" button."\n[b1] button "ok"\n[b2] button "no"',
        elements=(Element("b1", "button", "ok", 10, 10, 5, 5), Element("b2", "button", "no", 20, 10, 5, 5)),
    )
    action = await policy.act(miniwob_task("click-button", 3), page, 0, "e2")
    assert action.startswith("click(") and "b1" in action, action
    policy.end_episode("e2")
    policy.end_episode("e1")
