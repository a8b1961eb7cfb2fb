"""Coordinator: one control plane split into shards, with leases routed to them (plain Python, no Ray).

Why shards: one ControlPlane is a single-threaded decision maker; the coordinator splits every pool over
``n`` of them (in a cluster, one per group of nodes: each owns the instances of its hosts), so that a shard's
loss costs its share only and its work (provisioning storms, health fan-out) is spread.

Routing is O(1): the coordinator keeps, per pool, the set of shards that have an idle instance (shards tell it
through ``on_idle``) and leases from the first, rotating it to the back; a lease id starts with its shard's
index, so a release goes straight to its shard. When no shard has an idle instance, callers wait in one FIFO
queue per pool until an instance comes back or their driver cancels them at their timeout (back-pressure);
the queued demand is spread over the shards so that they provision for it within ``max_size``.

Recovery: the coordinator records every outstanding lease (lease -> shard, instance). When a shard dies, its
leases stay valid (their holders talk to the env actors directly); releases that arrive meanwhile are
recorded and its instances become idle again on rebuild. ``rebuild_shard`` builds a new shard from what its
live actors report (:class:`~maigym_ray.envs.control.ActorState`) and the leases recorded here, so no lease
is lost or handed out twice.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable

from maigym_ray.envs.config import PoolConfig, ShardingConfig
from maigym_ray.envs.control import ActorState, ControlPlane, Instance, Waiter, WaitQueue
from maigym_ray.errors import ConfigError, EnvUnavailableError


def shard_count(pools: dict[str, PoolConfig], cfg: ShardingConfig) -> int:
    """The number of shards ``cfg`` asks for over ``pools``."""
    if cfg.shards:
        return cfg.shards
    return max(1, math.ceil(sum(p.max_size for p in pools.values()) / cfg.instances_per_shard))


def split_pools(pools: dict[str, PoolConfig], n: int, k: int) -> dict[str, PoolConfig]:
    """Shard ``k`` of ``n``'s share of every pool: target and max sizes split as evenly as integers allow."""

    def share(total: int) -> int:
        return total // n + (1 if k < total % n else 0)

    return {
        name: dataclasses.replace(p, target_size=share(p.target_size), max_size=share(p.max_size))
        for name, p in pools.items()
    }


class Coordinator:
    """Routes leases and releases over the shards of a control plane; see the module docstring."""

    def __init__(
        self,
        pools: dict[str, PoolConfig],
        cfg: ShardingConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg or ShardingConfig()
        self.pools = pools
        self.clock = clock
        n = shard_count(pools, self.cfg)
        self.shard_pools = [split_pools(pools, n, k) for k in range(n)]
        self.shards: list[ControlPlane | None] = [self._plane(k) for k in range(n)]
        #: every outstanding lease: lease id -> (shard index, instance id).
        self.held: dict[str, tuple[int, str]] = {}
        self.counters: Counter[str] = Counter()
        self._free: dict[str, dict[int, None]] = {p: {} for p in pools}
        self._waiters: dict[str, WaitQueue] = {p: WaitQueue() for p in pools}

    def _plane(self, k: int) -> ControlPlane:
        return ControlPlane(self.shard_pools[k], self.clock, prefix=f"{k}.", on_idle=self._on_idle)

    @staticmethod
    def shard_of(lease_or_instance: str) -> int:
        """The shard index a lease or instance id belongs to."""
        return int(lease_or_instance.split(".", 1)[0])

    # -- leases ---------------------------------------------------------------------------------------------
    def _take(self, pool: str) -> str | None:
        free = self._free[pool]
        while free:
            k = next(iter(free))
            del free[k]
            plane = self.shards[k]
            if plane is None:
                continue
            lease = plane.try_lease(pool)
            if plane.idle_count(pool):
                free[k] = None  # to the back: the next lease goes to the next shard
            if lease is not None:
                self.held[lease] = (k, plane.leases[lease])
                return lease
        return None

    def request(self, pool: str, n: int = 1) -> Waiter:
        """Leases ``n`` instances of ``pool`` from whichever shards have them idle, or queues the caller
        (FIFO) until they do; the driver cancels a waiter at its timeout with :meth:`cancel`."""
        if pool not in self.pools:
            raise ConfigError(f"no pool {pool!r}; pools: {', '.join(self.pools)}")
        if n > self.pools[pool].max_size:
            raise ConfigError(f"request for {n} instances exceeds pool {pool!r} max_size")
        w = Waiter(pool, n, self.clock())
        if self._waiters[pool].admit(w, lambda: self._take(pool)):
            self.counters["queued"] += 1
            self._spread_demand(pool)
        return w

    def _on_idle(self, plane: ControlPlane, pool: str) -> None:
        self._free[pool][self.shard_of(plane.prefix)] = None
        if self._waiters[pool]:
            self._dispatch(pool)

    def _dispatch(self, pool: str) -> None:
        queue = self._waiters[pool]
        before = queue.owed
        queue.dispatch(lambda: self._take(pool))
        if queue.owed != before:
            self._spread_demand(pool)

    def _spread_demand(self, pool: str) -> None:
        live = [p for p in self.shards if p is not None]
        share = math.ceil(self._waiters[pool].owed / len(live)) if live else 0
        for p in live:
            p.extra_demand[pool] = share

    def cancel(self, w: Waiter) -> None:
        """The caller gave up: returns what it was partly granted; no-op once the waiter is done."""
        if self._waiters[w.pool].cancel(w, self.release, self.counters):
            self._spread_demand(w.pool)

    def release(self, lease: str) -> tuple[str, Instance | None]:
        """Returns a lease to its shard: the shard's outcome ("idle", "recycle", "drop", "unknown"), or
        "deferred" while the shard is down (its instance is idle again once the shard is rebuilt)."""
        entry = self.held.pop(lease, None)
        if entry is None:
            return "unknown", None
        plane = self.shards[entry[0]]
        if plane is None:
            self.counters["deferred_releases"] += 1
            return "deferred", None
        return plane.release(lease)

    def lookup(self, lease: str) -> Instance:
        """The instance behind a lease (its shard must be up)."""
        plane = self.shards[self.shard_of(lease)]
        if plane is None:
            raise EnvUnavailableError(f"the shard of lease {lease[:10]} is being rebuilt; retry")
        return plane.lookup(lease)

    def begin_episode(self, lease: str) -> None:
        """Counts an episode on the leased instance (its actor counts it too, for a rebuild)."""
        plane = self.shards[self.shard_of(lease)]
        if plane is not None:
            plane.begin_episode(lease)

    def report_failure(self, lease: str, reason: str) -> str | None:
        """A holder saw its instance fail: the id of the instance whose actor the driver must kill (its
        replacement is provisioned), or None when the lease is unknown or the instance already replaced."""
        entry = self.held.get(lease)
        if entry is None:
            return None
        k, iid = entry
        plane = self.shards[k]
        if plane is None:  # the rebuild will find the actor gone and keep the lease as a broken record
            return iid
        inst = plane.report_failure(lease, reason)
        return inst.id if inst is not None else None

    # -- shards ---------------------------------------------------------------------------------------------
    def kill_shard(self, k: int) -> None:
        """Shard ``k`` is gone (its process died): stop routing to it; its leases stay held."""
        self.shards[k] = None
        for free in self._free.values():
            free.pop(k, None)
        self.counters["shards_lost"] += 1
        for pool in self.pools:
            self._spread_demand(pool)

    def rebuild_shard(self, k: int, actors: Iterable[ActorState]) -> ControlPlane:
        """A new shard ``k`` from what its live actors report and the leases recorded here."""
        held = {lease: iid for lease, (kk, iid) in self.held.items() if kk == k}
        plane = ControlPlane.rebuild(
            self.shard_pools[k], actors, held, self.clock, prefix=f"{k}.", on_idle=self._on_idle
        )
        self.shards[k] = plane
        self.counters["shards_rebuilt"] += 1
        for pool in self.pools:
            self._spread_demand(pool)
        plane.kick()
        return plane

    def sizes(self) -> dict[str, dict[str, int]]:
        """Per pool, summed over the live shards: the count of each state and the total ``size``."""
        out: dict[str, dict[str, int]] = {name: Counter() for name in self.pools}
        for plane in self.shards:
            if plane is not None:
                for name, sizes in plane.sizes().items():
                    out[name].update(sizes)
        return {name: dict(c) for name, c in out.items()}

    def waiting(self, pool: str) -> int:
        """Instances callers wait for in ``pool``'s queue."""
        return self._waiters[pool].owed
