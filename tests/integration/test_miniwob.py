"""MiniWoB++ through the EnvManager and run_episode: the page's reward is the episode's, scripted solutions pass."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("miniwob")

from maigym_ray.envs.lease import LeasedEnv
from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.policy import RandomPolicy
from maigym_ray.suites.miniwob import manager_config, miniwob_task
from maigym_ray.suites.miniwob_solutions import SOLVERS, MiniwobScriptedPolicy

pytestmark = pytest.mark.integration

INSTANCES = 2
#: CI runs every solved task on SEEDS seeds; benchmarks/miniwob_scripted.py runs the full 20 seeds.
SEEDS = 5


@pytest.fixture(scope="module")
def manager(ray_local):
    from maigym_ray.envs.manager import EnvManager

    cfg = manager_config(INSTANCES, screenshot=False)
    m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg)
    ray_local.get(m.start.remote(wait=True), timeout=180)
    yield m
    ray_local.get(m.shutdown.remote(), timeout=60)
    ray_local.kill(m)


async def _episodes(manager, jobs, policy_for):
    """Runs (task, policy) jobs on INSTANCES leased instances; returns [(task, trajectory, page state)]."""
    queue: asyncio.Queue = asyncio.Queue()
    for j in jobs:
        queue.put_nowait(j)
    out = []

    async def worker() -> None:
        env = await LeasedEnv.acquire(manager, "web")
        try:
            while not queue.empty():
                task = queue.get_nowait()
                traj = await run_episode(env, task, policy_for(task))
                out.append((task, traj, (await manager.state.remote(env.lease))["miniwob"]))
        finally:
            await env.release()

    await asyncio.gather(*(worker() for _ in range(INSTANCES)))
    return out


async def test_random_policy_scores_what_the_page_says(manager):
    # click-checkboxes pays a fraction (right boxes / boxes) and -1 .. 1, so an episode value that equals the
    # page's raw reward clipped to [0, 1] cannot come from a success flag of ours.
    tasks = [miniwob_task(n, s, max_steps=6) for n in ("click-checkboxes", "click-button") for s in range(6)]
    policies = {t.id: RandomPolicy(seed=i) for i, t in enumerate(tasks)}
    results = await _episodes(manager, tasks, lambda t: policies[t.id])
    assert len(results) == len(tasks)
    for task, traj, page in results:
        assert not traj.infra_failed, traj.error
        assert page["task"] == task.initial_state["miniwob"]["task"]
        want = min(1.0, max(0.0, page["raw_reward"])) if page["done"] else 0.0
        assert traj.reward.value == pytest.approx(want), (task.id, page, traj.reward)
        assert traj.reward.success == (page["done"] and page["raw_reward"] > 0)
        if page["done"]:  # the page ended the episode: the harness stopped on that step
            assert len(traj.turns) <= task.max_steps
    ended = [p for _, _, p in results if p["done"]]
    assert ended, "a random policy ended no episode at all"
    assert {p["raw_reward"] > 0 for p in ended} == {True, False}, "need both page wins and page losses"


async def test_instruction_and_seed_come_from_the_page(manager):
    env = await LeasedEnv.acquire(manager, "web")
    try:
        a = await env.reset(miniwob_task("enter-text", 3))
        b = await env.reset(miniwob_task("enter-text", 3))
        c = await env.reset(miniwob_task("enter-text", 4))
    finally:
        await env.release()
    first = a.a11y.split("\n", 1)[0]
    assert first.startswith('instruction "Enter "') and first.endswith('press Submit."')
    assert a.a11y.split("\n", 1)[0] == b.a11y.split("\n", 1)[0]  # same seed, same problem
    assert a.a11y.split("\n", 1)[0] != c.a11y.split("\n", 1)[0]


async def test_a_restarted_episode_starts_as_a_freshly_loaded_one(manager):
    # The next episode of the same task restarts in the loaded page (the suite's own reset). What it shows
    # first must be what a fresh load of the page shows for that seed: the previous episode (solved, or cut
    # short mid-way) leaves nothing on screen, in the element ids or in the page's reward display.
    env = await LeasedEnv.acquire(manager, "web")
    scripted = MiniwobScriptedPolicy()
    try:
        for k, name in enumerate(sorted(SOLVERS)):
            first = miniwob_task(name, 7, max_steps=2) if k % 2 else miniwob_task(name, 7)
            await run_episode(env, first, RandomPolicy(seed=k) if k % 2 else scripted)
            restarted = await env.reset(miniwob_task(name, 8))
            assert (await manager.state.remote(env.lease))["miniwob"]["in_page"] >= 2, name
            other = "click-button" if name == "click-test" else "click-test"
            await env.reset(miniwob_task(other, 0))  # another task: the next reset loads the page
            loaded = await env.reset(miniwob_task(name, 8))
            assert (await manager.state.remote(env.lease))["miniwob"]["in_page"] == 1, name
            assert restarted.a11y == loaded.a11y, name
            assert restarted.elements == loaded.elements, name
    finally:
        await env.release()


async def test_the_pages_time_limit_ends_the_episode(manager):
    # click-test's page allows 10 s; waiting past it makes the page end the episode with raw reward -1, and
    # the episode stops there, before its step limit.
    class Waiter:
        async def act(self, task, obs, step, episode_id=""):
            return "wait(seconds=5)"

    results = await _episodes(manager, [miniwob_task("click-test", 0, max_steps=5)], lambda t: Waiter())
    (_, traj, page) = results[0]
    assert page["done"] and page["raw_reward"] == -1 and "timed out" in str(page["reason"])
    assert len(traj.turns) in (2, 3) and traj.reward.value == 0.0 and not traj.reward.success


async def test_scripted_solutions_solve_at_least_20_tasks(manager):
    assert len(SOLVERS) >= 20
    tasks = [miniwob_task(n, 1000 + s) for n in sorted(SOLVERS) for s in range(SEEDS)]
    policy = MiniwobScriptedPolicy()
    t0 = time.perf_counter()
    results = await _episodes(manager, tasks, lambda t: policy)
    elapsed = time.perf_counter() - t0
    wins: dict[str, list[bool]] = {}
    for task, traj, _page in results:
        assert not traj.infra_failed, traj.error
        wins.setdefault(task.initial_state["miniwob"]["task"], []).append(traj.reward.success)
    rates = {n: sum(w) / len(w) for n, w in wins.items()}
    good = sorted(n for n, r in rates.items() if r >= 0.95)
    print(f"\n{len(results)} episodes in {elapsed:.1f}s; success by task: {rates}")
    assert len(good) >= 20, f"only {len(good)} tasks at >= 95 %: {rates}"


def test_gymnasium_adapter_passes_check_env(manager):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    from maigym_ray.suites.gym_env import register_envs

    assert "maigym/miniwob.click-button" in register_envs()
    env = gymnasium.make("maigym/miniwob.click-button", manager=manager)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=7)
        assert info["seed"] == 7 and set(obs) == {"a11y"}  # the pool here takes no screenshots
        first = obs["a11y"].split("\n", 1)[0]
        assert env.reset(seed=7)[0]["a11y"].split("\n", 1)[0] == first  # seeded reset: the same problem
        want = first.split('"')[2]  # instruction "Click on the "X" button."
        target = next(
            line.split("]")[0][1:] for line in obs["a11y"].splitlines() if line.endswith(f'button "{want}"')
        )
        _, reward, terminated, truncated, info = env.step(f'click(id="{target}")')
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
        env.reset(seed=7)
        for _ in range(14):  # 15 steps of nothing: the step limit truncates, it does not terminate
            assert env.step("wait(seconds=0)")[2:4] == (False, False)
        _, reward, terminated, truncated, _ = env.step("wait(seconds=0)")
        assert (reward, terminated, truncated) == (0.0, False, True)
    finally:
        env.close()
