"""ScaleSim: the sharded control plane (the EnvManager's own ControlPlane code, under a Coordinator) driven by
simulated callers against the simulated backend on a simulated clock.

What it does, in simulated time: brings every pool up (a provisioning storm limited by per-host bring-up
limits), then runs callers that lease, reset, hold an instance for an episode and release it, more callers
than instances so that some wait (FIFO, with a timeout); instances are recycled after N episodes, failed
resets are reported and replaced, idle instances are health-checked in rotation, and one shard is killed in
the middle and rebuilt from its actors' state.

What it measures: the control plane's CPU time (thread CPU, not simulated time) per lease and in total, the
simulated bring-up time, and a ledger kept apart from the control plane that counts a lease handed out while
its instance was held (double) and a lease the control plane lost or leaked (lost).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from maigym_ray.config import PoolConfig, ShardingConfig
from maigym_ray.envs.control import Waiter
from maigym_ray.envs.coordinator import Coordinator
from maigym_ray.errors import ConfigError
from maigym_ray.testing.sim_backend import SimBackend, SimBackendConfig
from maigym_ray.testing.sim_clock import SimClock

_cpu = time.thread_time


@dataclass
class SimWorkload:
    """What the simulated callers do, and the shard drill."""

    #: callers per instance; above 1 some callers wait (back-pressure).
    callers_per_instance: float = 1.02
    #: median simulated seconds an episode holds its instance after the reset (lognormal, sigma 0.5).
    episode_median_s: float = 60.0
    #: simulated seconds a caller waits for an instance before it gives up (and asks again).
    request_timeout_s: float = 30.0
    #: simulated seconds of the leasing phase (after every pool is full).
    duration_s: float = 600.0
    #: seconds between health-check rounds of each shard, and instances checked per pool per round.
    health_interval_s: float = 5.0
    health_batch: int = 64
    #: the shard killed (-1: none), when (a fraction of the leasing phase), and how long until it is rebuilt.
    kill_shard: int = 1
    kill_at: float = 0.5
    rebuild_after_s: float = 10.0

    def __post_init__(self) -> None:
        """Checks a SimWorkload, raising :class:`ConfigError` naming the field."""
        if self.callers_per_instance <= 0 or self.episode_median_s <= 0 or self.request_timeout_s <= 0:
            raise ConfigError(
                "workload: callers_per_instance, episode_median_s, request_timeout_s must be > 0"
            )
        if (
            self.duration_s < 0
            or self.health_interval_s <= 0
            or self.health_batch < 0
            or self.rebuild_after_s < 0
        ):
            raise ConfigError("workload: need duration_s >= 0, health_interval_s > 0, health_batch >= 0")
        if not 0.0 <= self.kill_at <= 1.0:
            raise ConfigError(f"workload.kill_at={self.kill_at}: need a fraction in [0, 1]")


@dataclass
class SimResult:
    """A run's figures."""

    instances: int
    shards: int
    hosts: int
    bringup_s: float
    lease_cpu_s: list[float]
    manager_cpu_s: float
    leases: int
    lost_leases: int
    double_leases: int
    sim_s: float
    events: int
    wall_s: float
    counters: dict[str, int] = field(default_factory=dict)

    def percentile_ms(self, q: float) -> float:
        """The q-quantile (0..1) of the per-lease control-plane CPU time, in milliseconds."""
        if not self.lease_cpu_s:
            return 0.0
        xs = sorted(self.lease_cpu_s)
        return 1000.0 * xs[min(len(xs) - 1, int(q * len(xs)))]


class ScaleSim:
    """One simulated fleet; ``run()`` returns its :class:`SimResult`."""

    def __init__(
        self,
        pools: dict[str, PoolConfig],
        sharding: ShardingConfig | None = None,
        backend: SimBackendConfig | None = None,
        workload: SimWorkload | None = None,
    ) -> None:
        self.work = workload or SimWorkload()
        self.clock = SimClock()
        self.coord = Coordinator(pools, sharding, clock=self.clock)
        self.backend = SimBackend(self.clock, backend)
        self.pools = pools
        self.rng = self.backend.rng
        for k, shard_pools in enumerate(self.coord.shard_pools):
            for p in shard_pools.values():
                self.backend.add_hosts(str(k), p.platform, p.max_size)
        self.cpu_s = 0.0
        self.lease_cpu: list[float] = []
        self.counters: Counter[str] = Counter()
        self._completed: list[Waiter] = []
        self._wait_cpu: dict[Waiter, float] = {}
        self._caller: dict[Waiter, int] = {}
        self._provisioning: set[int] = set()
        self._stopping = False
        # the ledger, kept apart from the control plane: instance -> lease its caller holds, and back
        self.holder: dict[str, str] = {}
        self.holding: dict[str, str] = {}
        self.lost = 0
        self.double = 0

    # -- the control plane, timed ---------------------------------------------------------------------------
    def _cp(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Calls the control plane, charging its CPU time; waiters it completed get that time too."""
        t0 = _cpu()
        out = fn(*args)
        dt = _cpu() - t0
        self.cpu_s += dt
        if self._completed:
            done, self._completed = self._completed, []
            for w in done:
                self._granted(self._caller.pop(w), w, self._wait_cpu.pop(w) + dt)
        return out

    def _want_provision(self, k: int) -> None:
        if k not in self._provisioning:
            self._provisioning.add(k)
            self.clock.later(0.0, self._provision, k)

    def _provision(self, k: int) -> None:
        self._provisioning.discard(k)
        plane = self.coord.shards[k]
        if plane is None:
            return
        for pool, n in self._cp(plane.provision_plan).items():
            platform = plane.pools[pool].platform
            for _ in range(n):
                inst = self._cp(plane.new_instance, pool)
                if not self.backend.bring_up(
                    inst.id, pool, platform, str(k), self._brought_up_cb(k, inst.id)
                ):
                    self._cp(plane.start_failed, inst.id, "no host room")
                    break

    def _brought_up_cb(self, k: int, iid: str) -> Callable[[bool], None]:
        return lambda ok: self._brought_up(k, iid, ok)

    def _brought_up(self, k: int, iid: str, ok: bool) -> None:
        plane = self.coord.shards[k]
        if plane is None:  # the rebuilt shard takes the actor back from its state
            return
        if ok:
            if not self._cp(plane.started, iid):
                self.backend.kill(iid)
        else:
            self._cp(plane.start_failed, iid, "sim")
            self._want_provision(k)

    def _health(self, k: int) -> None:
        if self._stopping:
            return
        plane = self.coord.shards[k]
        if plane is not None:
            for inst in self._cp(plane.health_batch, self.work.health_batch):
                gone = self._cp(plane.health_result, inst.id, self.backend.health(inst.id))
                if gone is not None:
                    self.backend.kill(gone.id)
                    self._want_provision(k)
        self.clock.later(self.work.health_interval_s, self._health, k)

    # -- callers --------------------------------------------------------------------------------------------
    def _ask(self, c: int, pool: str) -> None:
        if self._stopping:
            return
        t0 = _cpu()
        w = self.coord.request(pool, 1)
        dt = _cpu() - t0
        self.cpu_s += dt
        if w.done:
            self._granted(c, w, dt)
            return
        self._wait_cpu[w] = dt
        self._caller[w] = c
        w.on_done = lambda done: self._completed.append(done)
        self.clock.later(self.work.request_timeout_s, self._give_up, c, w)
        for k, plane in enumerate(self.coord.shards):
            if plane is not None:
                self._want_provision(k)

    def _give_up(self, c: int, w: Waiter) -> None:
        if w.done:
            return
        self._cp(self.coord.cancel, w)
        self._wait_cpu.pop(w, None)
        self._caller.pop(w, None)
        self.counters["request_timeouts"] += 1
        self._ask(c, w.pool)

    def _granted(self, c: int, w: Waiter, cpu_s: float) -> None:
        self.lease_cpu.append(cpu_s)
        lease = w.leases[0]
        iid = self.coord.held[lease][1]
        if iid in self.holder:
            self.double += 1
        self.holder[iid] = lease
        self.holding[lease] = iid
        self._cp(self.coord.begin_episode, lease)
        self.backend.reset(iid, lambda ok: self._reset_done(c, w.pool, lease, iid, ok))

    def _reset_done(self, c: int, pool: str, lease: str, iid: str, ok: bool) -> None:
        if ok:
            hold = self.work.episode_median_s * math.exp(self.rng.gauss(0.0, 0.5))
            self.clock.later(hold, self._finish, c, pool, lease, iid)
            return
        self.counters["failed_resets"] += 1
        dead = self._cp(self.coord.report_failure, lease, "reset")
        if dead is not None:
            self.backend.kill(dead)
        self._finish(c, pool, lease, iid)

    def _finish(self, c: int, pool: str, lease: str, iid: str) -> None:
        if self.holder.pop(iid, None) != lease or self.holding.pop(lease, None) != iid:
            self.lost += 1
        k = Coordinator.shard_of(lease)
        outcome, inst = self._cp(self.coord.release, lease)
        if outcome == "unknown":
            self.lost += 1
        elif outcome in ("recycle", "drop") and inst is not None:
            self.backend.kill(inst.id)
        self.counters[f"release:{outcome}"] += 1
        if self.coord.shards[k] is not None:
            self._want_provision(k)
        self._ask(c, pool)

    # -- the shard drill ------------------------------------------------------------------------------------
    def _kill_shard(self, k: int) -> None:
        self._cp(self.coord.kill_shard, k)
        self.clock.later(self.work.rebuild_after_s, self._rebuild_shard, k)

    def _rebuild_shard(self, k: int) -> None:
        plane = self._cp(self.coord.rebuild_shard, k, self.backend.actor_states(str(k)))
        for actor in plane.retired:
            self.backend.kill(actor.id)
        self._want_provision(k)

    # -- the run --------------------------------------------------------------------------------------------
    def _full(self) -> bool:
        return all(plane is not None and plane.full() for plane in self.coord.shards)

    def bring_up(self) -> float:
        """Provisions every pool to its target; returns the simulated seconds it took."""
        t0 = self.clock.now
        for k in range(len(self.coord.shards)):
            self._want_provision(k)
        self.clock.run(stop=self._full)
        if not self._full():
            raise RuntimeError(f"the pools never filled: {self.coord.sizes()}")
        return self.clock.now - t0

    def run(self, lease_phase: bool = True) -> SimResult:
        """Brings every pool up, then (``lease_phase``) runs the callers and the shard drill; checks the
        ledger against the control plane at the end."""
        wall0 = time.perf_counter()
        bringup_s = self.bring_up()
        if lease_phase:
            t0 = self.clock.now
            c = 0
            for name, p in self.pools.items():
                for _ in range(math.ceil(p.target_size * self.work.callers_per_instance)):
                    self.clock.later(self.rng.random() * self.work.request_timeout_s, self._ask, c, name)
                    c += 1
            for k in range(len(self.coord.shards)):
                self.clock.later(self.work.health_interval_s, self._health, k)
            if 0 <= self.work.kill_shard < len(self.coord.shards):
                self.clock.at(
                    t0 + self.work.kill_at * self.work.duration_s, self._kill_shard, self.work.kill_shard
                )
            self.clock.run(until=t0 + self.work.duration_s)
            self._stopping = True
            self._audit()
        counters = Counter(self.counters)
        counters.update(self.coord.counters)
        for plane in self.coord.shards:
            if plane is not None:
                counters.update(plane.counters)
        return SimResult(
            instances=sum(p.target_size for p in self.pools.values()),
            shards=len(self.coord.shards),
            hosts=self.backend.hosts(),
            bringup_s=bringup_s,
            lease_cpu_s=self.lease_cpu,
            manager_cpu_s=self.cpu_s,
            leases=len(self.lease_cpu),
            lost_leases=self.lost,
            double_leases=self.double,
            sim_s=self.clock.now,
            events=self.clock.events,
            wall_s=time.perf_counter() - wall0,
            counters=dict(counters),
        )

    def _audit(self) -> None:
        """Compares the ledger with the control plane: a lease a caller holds must map to its instance there
        (else lost), a lease the control plane holds must have a caller (else lost: leaked), and no instance
        may sit under two leases (double)."""
        for lease, iid in self.holding.items():
            entry = self.coord.held.get(lease)
            plane = self.coord.shards[Coordinator.shard_of(lease)]
            if entry is None or entry[1] != iid or (plane is not None and plane.leases.get(lease) != iid):
                self.lost += 1
        self.lost += sum(1 for lease in self.coord.held if lease not in self.holding)
        seen: Counter[str] = Counter(iid for _, iid in self.coord.held.values())
        self.double += sum(n - 1 for n in seen.values() if n > 1)
        for plane in self.coord.shards:
            if plane is None:
                continue
            per: Counter[str] = Counter(plane.leases.values())
            self.double += sum(n - 1 for n in per.values() if n > 1)
            for inst in plane.instances.values():
                if inst.state == "busy" and (inst.lease is None or plane.leases.get(inst.lease) != inst.id):
                    self.lost += 1


def fleet(instances: int, mix: dict[str, float], recycle_after: int = 10) -> dict[str, PoolConfig]:
    """Pools (one per platform, backend "fake": the simulation never builds a backend) summing to
    ``instances``, split by the ``mix`` shares; every pool's target is its max (all held)."""
    total = sum(mix.values())
    names = list(mix)
    sizes = [int(instances * mix[n] / total) for n in names]
    sizes[0] += instances - sum(sizes)
    return {
        name: PoolConfig(
            platform=name, backend="fake", target_size=size, max_size=size, recycle_after=recycle_after
        )
        for name, size in zip(names, sizes, strict=True)
        if size > 0
    }
