"""GroupStream: the everlasting rollout pool of asynchronous GRPO (``driver.mode=async``).

Lanes live across policy updates. Each lane starts a group (the sampler's next task, its attempts), runs its
episodes and hands the finished group to the trainer's queue, then starts the next. Episodes of every lane share
one limit of ``concurrency`` at a time: a group's finished episodes give their slots to the next groups'
instead of idling until its slowest episode ends. So the pool holds more lanes than ``concurrency`` needs
(``driver.pool_oversubscription``).

A lane starts group ``n`` only when the staleness rule admits it (rl/staleness.py ``may_start``, counted in the
policy updates done since the pool opened) and while the budget lasts. The budget is the groups the RL phase will train on,
plus one for every group the trainer could not use (past the bound, or every member infra-failed), so the
phase ends with no group left in flight. The stream holds no model and no Ray: it calls what it is given, so
the simulation (benchmarks/scale_sim.py ``--async``) drives the same scheduler on a simulated clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import ConfigError
from maigym_ray.rl.staleness import may_start, staleness


def pool_lanes(concurrency: int, group_size: int, oversubscription: float) -> int:
    """Groups in flight at once: enough for ``oversubscription`` × ``concurrency`` episodes, plus one so that a
    finishing group's successor can start while the others run."""
    if concurrency < 1 or group_size < 1 or oversubscription < 1:
        raise ConfigError(
            f"driver.pool_oversubscription={oversubscription} (need >= 1), concurrency={concurrency} and "
            f"group size={group_size} (need >= 1)"
        )
    return -(-int(oversubscription * concurrency) // group_size) + 1


@dataclass
class StartedGroup:
    """What a lane runs: group number ``index`` (start order since RL began), its task and attempts."""

    index: int
    task_id: str
    #: ``(item, task, platform)`` per attempt, as run_rollouts takes them.
    work: list[tuple[Any, Any, str]]
    #: the version the engines served when it started.
    version: int


@dataclass
class FinishedGroup:
    """A group whose every episode ended (success, failure, task error or infrastructure failure)."""

    group: StartedGroup
    #: the ``rollout.Finished`` of each attempt, in any order.
    episodes: list[Any]


class GroupStream:
    """See the module docstring. ``start_group(n, version)`` makes group ``n``; ``run_episode(item, task,
    platform)`` runs one attempt to its end (a ``rollout.Finished``, never raising for an episode's failure);
    ``version()`` is the version the engines serve (a group records the one it started under)."""

    def __init__(
        self,
        start_group: Callable[[int, int], StartedGroup],
        run_episode: Callable[[Any, Any, str], Awaitable[Any]],
        version: Callable[[], int],
        *,
        concurrency: int,
        lanes: int,
        max_staleness: int,
        per_update: int,
        budget: int,
    ) -> None:
        self._start_group, self._run_episode, self._version = start_group, run_episode, version
        self._slots = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Condition()
        self._ready: asyncio.Queue[FinishedGroup] = asyncio.Queue()
        self.lanes, self.max_staleness, self.per_update, self.budget = (
            lanes,
            max_staleness,
            per_update,
            budget,
        )
        #: policy updates done since the pool opened (``advanced``): the staleness rule's admission counts them
        self.updates = 0
        self.started = 0
        self.in_flight = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._failed: BaseException | None = None

    def start(self) -> None:
        """Starts the lanes (in the running event loop)."""
        self._tasks = [asyncio.create_task(self._lane()) for _ in range(self.lanes)]

    async def take(self) -> FinishedGroup:
        """The next finished group, in finishing order (waits for one). A lane's own failure (a bug: episodes
        never raise) is raised here rather than hanging the trainer."""
        while True:
            if self._failed is not None:
                raise self._failed
            try:
                return await asyncio.wait_for(self._ready.get(), 1.0)
            except TimeoutError:
                continue

    async def take_round(
        self,
        want: int,
        trainer_version: int,
        version_of: Callable[[FinishedGroup], int],
        usable: Callable[[FinishedGroup], bool],
    ) -> tuple[list[tuple[FinishedGroup, int]], list[FinishedGroup]]:
        """The next ``want`` finished groups within ``max_staleness`` of ``trainer_version``, each with its
        staleness (``version_of`` gives a group's version, rl/staleness.py ``group_version``), and the groups
        taken past the bound. The budget grows by one for each group past the bound and for each that is not
        ``usable`` (every member infra-failed), so a round still trains on ``want`` groups' worth and the pool
        ends with nothing in flight."""
        taken: list[tuple[FinishedGroup, int]] = []
        stale: list[FinishedGroup] = []
        while len(taken) < want:
            done = await self.take()
            age = staleness(trainer_version, version_of(done))
            if age > self.max_staleness:
                stale.append(done)
                await self.extend(1)
                continue
            if not usable(done):
                await self.extend(1)
            taken.append((done, age))
        return taken, stale

    async def advanced(self) -> None:
        """One policy update is done and its weights are published (or the round had nothing to train on):
        lanes held back by the staleness rule may go on. Admission counts updates, not versions, so a round
        that trains nothing still lets the next round's groups start."""
        async with self._wake:
            self.updates += 1
            self._wake.notify_all()

    async def extend(self, groups: int) -> None:
        """Adds ``groups`` to the budget (one for each group the trainer could not use)."""
        async with self._wake:
            self.budget += groups
            self._wake.notify_all()

    async def close(self) -> None:
        """Stops the lanes. Call it once no group is in flight (``in_flight == 0``): a lane cancelled mid-group
        would lose that group's episodes from the record."""
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _admits(self) -> bool:
        return self.started < self.budget and may_start(
            self.started, self.updates, self.max_staleness, self.per_update
        )

    async def _lane(self) -> None:
        try:
            while True:
                async with self._wake:
                    await self._wake.wait_for(self._admits)
                    n = self.started
                    self.started += 1
                    self.in_flight += 1
                group = self._start_group(n, self._version())
                episodes = await asyncio.gather(*(self._episode(*w) for w in group.work))
                self.in_flight -= 1
                self._ready.put_nowait(FinishedGroup(group, list(episodes)))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # surfaced by take()
            self._failed = exc

    async def _episode(self, item: Any, task: Any, platform: str) -> Any:
        async with self._slots:
            return await self._run_episode(item, task, platform)
