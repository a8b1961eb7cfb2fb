"""EngineRouter: every request of an episode goes to one engine; random mode spreads them."""

from __future__ import annotations

from collections import Counter

import pytest

from maigym_ray.generation import Generation, SamplingConfig
from maigym_ray.policy.router import EngineRouter

pytestmark = pytest.mark.unit


class FakeRemote:
    def __init__(self, idx: int, log: list[int]) -> None:
        self.idx, self.log = idx, log

    async def remote(self, *args) -> Generation:
        self.log.append(self.idx)
        return Generation((self.idx,))


class FakeEngine:
    def __init__(self, idx: int, log: list[int]) -> None:
        self.generate = FakeRemote(idx, log)


async def test_sticky_routes_an_episode_to_one_engine_and_spreads_episodes():
    log: list[int] = []
    router = EngineRouter([FakeEngine(i, log) for i in range(3)], "sticky")
    for ep in ("a", "b", "c", "d", "e", "f"):
        for _ in range(4):
            await router.generate([1], [], SamplingConfig(), ep)
    per_episode = [log[i : i + 4] for i in range(0, len(log), 4)]
    assert all(len(set(chunk)) == 1 for chunk in per_episode)
    assert router.pick("a") == EngineRouter([0, 1, 2], "sticky").pick("a")  # stateless: same in any worker
    assert len(Counter(router.pick(f"ep{i}") for i in range(300))) == 3


async def test_random_mode_spreads_one_episode_and_bad_args():
    router = EngineRouter([0, 1, 2], "random", seed=1)
    assert len({router.pick("same") for _ in range(50)}) == 3
    with pytest.raises(ValueError):
        EngineRouter([0], "round-robin")
    with pytest.raises(ValueError):
        EngineRouter([], "sticky")
