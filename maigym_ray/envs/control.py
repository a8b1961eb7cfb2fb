"""ControlPlane: the EnvManager's bookkeeping of instances and leases as plain Python (no Ray, no asyncio).

It decides; its driver acts. The driver is the EnvManager Ray actor (maigym_ray/envs/manager.py), which starts
and kills env actors and waits on them, or the discrete-event simulation (maigym_ray/testing/scale_sim.py),
which does the same on a simulated clock: both run this code, so what the simulation measures at 20,000
instances is the logic the actor runs.

Every operation is O(1) in the number of instances: idle instances sit in one insertion-ordered set per pool
(the longest idle is leased first), callers that find no idle instance wait in one FIFO queue per pool, and the
per-state counts are kept as the states change rather than counted. The clock is injected (``clock``) and is
only read for the time a waiter gave up; waiting itself is the driver's (an asyncio timeout, a simulated
event), which then calls :meth:`ControlPlane.cancel`.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from maigym_ray.envs.config import PoolConfig
from maigym_ray.errors import ConfigError, EnvUnavailableError, LeaseError

STATES = ("starting", "idle", "busy", "broken")


@dataclass(eq=False)
class Instance:
    """One environment instance as the control plane sees it; ``handle`` is the driver's (an actor handle)."""

    id: str
    pool: str
    handle: Any = None
    state: str = "starting"  # starting | idle | busy | broken
    episodes: int = 0
    lease: str | None = None
    pid: int = 0
    #: the Ray node the actor runs on (its node services are there); "" until started.
    node_id: str = ""


@dataclass(eq=False)
class Waiter:
    """A request for ``n`` instances of ``pool``; ``leases`` fills in FIFO order until ``done``."""

    pool: str
    n: int
    since: float
    leases: list[str] = field(default_factory=list)
    done: bool = False
    cancelled: bool = False
    #: called once, when the last instance was granted (the driver wakes the caller).
    on_done: Callable[[Waiter], None] | None = None


class WaitQueue:
    """One pool's callers waiting for instances, served first come first served, and how many instances they
    are still owed (what provisioning must make up). Shared by the control plane and the shard coordinator;
    ``take`` is where each gets its next lease (None when nothing is idle)."""

    def __init__(self) -> None:
        self._q: deque[Waiter] = deque()
        #: instances granted to nobody yet that queued callers still wait for.
        self.owed = 0

    def __bool__(self) -> bool:
        return bool(self._q)

    def __iter__(self) -> Iterator[Waiter]:
        return iter(self._q)

    def _drop_gone(self) -> None:
        while self._q and (self._q[0].cancelled or self._q[0].done):  # callers that gave up leave lazily
            self._q.popleft()

    def admit(self, w: Waiter, take: Callable[[], str | None]) -> bool:
        """Grants ``w`` at once what is idle when nobody waits ahead of it; queues the rest. True if queued."""
        self._drop_gone()
        if not self._q:
            while len(w.leases) < w.n:
                lease = take()
                if lease is None:
                    break
                w.leases.append(lease)
        if len(w.leases) == w.n:
            w.done = True
            return False
        self._q.append(w)
        self.owed += w.n - len(w.leases)
        return True

    def dispatch(self, take: Callable[[], str | None]) -> None:
        """Grants idle instances to the queued callers in order until one is left short."""
        while self._q:
            w = self._q[0]
            if w.cancelled or w.done:
                self._q.popleft()
                continue
            lease = take()
            if lease is None:
                break
            w.leases.append(lease)
            self.owed -= 1
            if len(w.leases) == w.n:
                self._q.popleft()
                w.done = True
                if w.on_done is not None:
                    w.on_done(w)

    def cancel(self, w: Waiter, release: Callable[[str], object], counters: Counter[str]) -> bool:
        """The caller gave up (timeout, cancellation): marks ``w`` cancelled, forgets what it was still owed,
        counts a ``request_timeouts`` and hands each lease it was partly granted back to ``release``. False
        (and nothing done) once it was done or cancelled."""
        if w.done or w.cancelled:
            return False
        w.cancelled = True
        self.owed -= w.n - len(w.leases)
        counters["request_timeouts"] += 1
        for lease in w.leases:
            release(lease)
        return True


@dataclass(frozen=True)
class ActorState:
    """What a live env actor knows about itself: enough to rebuild a lost control plane from its actors."""

    id: str
    pool: str
    #: "starting" (bring-up not finished) or "up".
    state: str
    episodes: int = 0
    handle: Any = None
    pid: int = 0


class ControlPlane:
    """Instances, leases, warm-pool targets, waiting callers, health-check rotation and recycling decisions.

    ``prefix`` starts every lease id (a coordinator routes a release to its shard by it); ``on_idle(plane,
    pool)`` is called when an instance of ``pool`` is idle and no caller here waits for it (a coordinator's
    queue may)."""

    def __init__(
        self,
        pools: dict[str, PoolConfig],
        clock: Callable[[], float] = time.monotonic,
        prefix: str = "",
        on_idle: Callable[[ControlPlane, str], None] | None = None,
    ) -> None:
        self.pools = pools
        self.clock = clock
        self.prefix = prefix
        self.on_idle = on_idle
        self.instances: dict[str, Instance] = {}
        self.leases: dict[str, str] = {}
        #: leases outstanding per pool in callers' queues elsewhere (a coordinator's): provisioned for too.
        self.extra_demand: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self._idle: dict[str, dict[str, None]] = {p: {} for p in pools}
        self._waiters: dict[str, WaitQueue] = {p: WaitQueue() for p in pools}
        self._counts: dict[str, Counter[str]] = {p: Counter() for p in pools}
        self._health: dict[str, deque[str]] = {p: deque() for p in pools}
        #: actors a rebuild did not take back because they are due for recycling (the driver kills them).
        self.retired: list[ActorState] = []

    # -- states ---------------------------------------------------------------------------------------------
    def _set(self, inst: Instance, state: str) -> None:
        counts = self._counts[inst.pool]
        counts[inst.state] -= 1
        counts[state] += 1
        if inst.state == "idle":
            self._idle[inst.pool].pop(inst.id, None)
        if state == "idle":
            self._idle[inst.pool][inst.id] = None
        inst.state = state

    def _forget(self, inst: Instance) -> None:
        if self.instances.pop(inst.id, None) is not None:
            self._counts[inst.pool][inst.state] -= 1
            self._idle[inst.pool].pop(inst.id, None)

    def count(self, pool: str, state: str) -> int:
        """How many instances of ``pool`` are in ``state``."""
        return self._counts[pool][state]

    def sizes(self) -> dict[str, dict[str, int]]:
        """Per pool: the count of each state and the total ``size``."""
        out: dict[str, dict[str, int]] = {}
        for name in self.pools:
            sizes = {s: self._counts[name][s] for s in STATES}
            sizes["size"] = sum(sizes.values())
            out[name] = sizes
        return out

    def pool_for(self, platform: str) -> str:
        """The pool that serves ``platform``; ConfigError naming the configured platforms otherwise."""
        for name, p in self.pools.items():
            if p.platform == platform:
                return name
        valid = sorted({p.platform for p in self.pools.values()})
        raise ConfigError(f"no pool serves platform {platform!r}; configured platforms: {', '.join(valid)}")

    def full(self) -> bool:
        """True when every pool has ``target_size`` idle instances."""
        return all(self._counts[n]["idle"] >= p.target_size for n, p in self.pools.items())

    # -- provisioning ---------------------------------------------------------------------------------------
    def provision_plan(self) -> dict[str, int]:
        """How many instances to start now, per pool: enough for the warm target or the waiting demand,
        within ``max_size``."""
        plan: dict[str, int] = {}
        for name, pool in self.pools.items():
            c = self._counts[name]
            live = c["starting"] + c["idle"] + c["busy"]
            want = max(pool.target_size, self._waiters[name].owed + self.extra_demand[name])
            n = min(want - c["idle"] - c["starting"], pool.max_size - live)
            if n > 0:
                plan[name] = n
        return plan

    def new_instance(self, pool: str, handle: Any = None) -> Instance:
        """Records an instance being started (the driver starts it, then calls ``started`` or
        ``start_failed``)."""
        inst = Instance(f"{self.prefix}{pool}-{uuid.uuid4().hex[:12]}", pool, handle)
        self.instances[inst.id] = inst
        self._counts[pool]["starting"] += 1
        return inst

    def started(self, iid: str, pid: int = 0) -> bool:
        """The instance is up and idle; False when it was forgotten meanwhile (the driver then kills it)."""
        inst = self.instances.get(iid)
        if inst is None or inst.state != "starting":
            return False
        inst.pid = pid
        self.counters["started"] += 1
        self._set(inst, "idle")
        self._dispatch(inst.pool)
        return True

    def start_failed(self, iid: str, why: str = "") -> None:
        """The instance did not come up: forget it (the next plan starts another)."""
        inst = self.instances.get(iid)
        if inst is not None:
            self._forget(inst)
        self.counters["start_failures"] += 1
        if why:
            self.counters[f"start_failure:{why}"] += 1

    # -- leases ---------------------------------------------------------------------------------------------
    def try_lease(self, pool: str) -> str | None:
        """Leases the longest-idle instance of ``pool`` at once, or None (never waits, ignores the queue)."""
        idle = self._idle[pool]
        if not idle:
            return None
        inst = self.instances[next(iter(idle))]
        lease = f"{self.prefix}{uuid.uuid4().hex}"
        self._set(inst, "busy")
        inst.lease = lease
        self.leases[lease] = inst.id
        self.counters["leases"] += 1
        return lease

    def idle_count(self, pool: str) -> int:
        """Idle instances of ``pool``."""
        return len(self._idle[pool])

    def request(self, pool: str, n: int = 1) -> Waiter:
        """Leases ``n`` instances of ``pool``: granted at once when they are idle and nobody waits before
        this caller, else queued (FIFO) until ``release``/``started`` grant them or the driver cancels."""
        if n > self.pools[pool].max_size:
            raise ConfigError(f"request for {n} instances exceeds pool {pool!r} max_size")
        w = Waiter(pool, n, self.clock())
        if self._waiters[pool].admit(w, lambda: self.try_lease(pool)):
            self.counters["queued"] += 1
        return w

    def _dispatch(self, pool: str) -> None:
        """Grants idle instances of ``pool`` to its queued callers, first come first served."""
        self._waiters[pool].dispatch(lambda: self.try_lease(pool))
        if self._idle[pool] and self.on_idle is not None:
            self.on_idle(self, pool)

    def cancel(self, w: Waiter) -> None:
        """The caller gave up (timeout, cancellation): returns what it was partly granted; no-op once done."""
        self._waiters[w.pool].cancel(w, self.release, self.counters)

    def lookup(self, lease: str) -> Instance:
        """The instance behind a live lease; LeaseError when unknown, EnvUnavailableError when it failed."""
        iid = self.leases.get(lease)
        if iid is None:
            raise LeaseError(f"unknown or released lease {lease!r}")
        inst = self.instances.get(iid)
        if inst is None or inst.state == "broken":
            raise EnvUnavailableError(
                f"the instance behind lease {lease[:8]} failed and was replaced; release it"
            )
        return inst

    def begin_episode(self, lease: str) -> Instance:
        """A reset on the leased instance: counts the episode (recycling counts these)."""
        inst = self.lookup(lease)
        inst.episodes += 1
        return inst

    def release(self, lease: str) -> tuple[str, Instance | None]:
        """Returns a lease. Outcome: "idle" (back in the pool), "recycle" (it ran ``recycle_after``
        episodes: kill it gracefully), "drop" (it had failed: kill it) or "unknown" (already released)."""
        iid = self.leases.pop(lease, None)
        inst = self.instances.get(iid) if iid is not None else None
        if inst is None:
            return "unknown", None
        inst.lease = None
        self.counters["releases"] += 1
        pool = self.pools[inst.pool]
        if inst.state == "broken":
            self._forget(inst)
            return "drop", inst
        if pool.recycle_after and inst.episodes >= pool.recycle_after:
            self.counters["recycled"] += 1
            self._forget(inst)
            return "recycle", inst
        self._set(inst, "idle")
        self._dispatch(inst.pool)
        return "idle", inst

    # -- failures and health --------------------------------------------------------------------------------
    def replace(self, iid: str, why: str) -> Instance | None:
        """Takes a failed instance out of service (the driver kills its actor; the next plan replaces it).
        A leased one keeps its record, broken, so that its holder gets a clear error until it releases."""
        inst = self.instances.get(iid)
        if inst is None or inst.state == "broken":
            return None
        self.counters["replaced"] += 1
        self.counters[f"replaced:{why.split(':')[0]}"] += 1
        if inst.lease is None:
            self._forget(inst)
        else:
            self._set(inst, "broken")
        return inst

    def report_failure(self, lease: str, reason: str) -> Instance | None:
        """A lease holder saw its instance fail: :meth:`replace` it."""
        iid = self.leases.get(lease)
        return self.replace(iid, f"reported:{reason}") if iid is not None else None

    def health_batch(self, limit: int = 0) -> list[Instance]:
        """Idle instances to health-check now: every one (``limit`` 0), or the next ``limit`` of each pool in
        rotation, so that a check round costs the same at 20 or 20,000 instances."""
        out: list[Instance] = []
        for name in self.pools:
            if not limit:
                out.extend(self.instances[i] for i in self._idle[name])
                continue
            rota, taken = self._health[name], 0
            if not rota:
                rota.extend(self._idle[name])
            while rota and taken < limit:
                inst = self.instances.get(rota.popleft())
                if inst is not None and inst.state == "idle":
                    out.append(inst)
                    taken += 1
        return out

    def health_result(self, iid: str, ok: bool) -> Instance | None:
        """The outcome of a health check: a failed idle instance is replaced (returned, for the driver to
        kill)."""
        inst = self.instances.get(iid)
        if ok or inst is None or inst.state != "idle":
            return None
        self.counters["health_failures"] += 1
        return self.replace(iid, "health check failed")

    def forget(self, iid: str) -> Instance | None:
        """Drops an instance's record whatever its state (shutdown)."""
        inst = self.instances.get(iid)
        if inst is not None:
            self._forget(inst)
            if inst.lease is not None:
                self.leases.pop(inst.lease, None)
        return inst

    # -- recovery -------------------------------------------------------------------------------------------
    @classmethod
    def rebuild(
        cls,
        pools: dict[str, PoolConfig],
        actors: Iterable[ActorState],
        held: dict[str, str],
        clock: Callable[[], float] = time.monotonic,
        prefix: str = "",
        on_idle: Callable[[ControlPlane, str], None] | None = None,
    ) -> ControlPlane:
        """A control plane rebuilt after its predecessor was lost: every live actor is taken back, busy under
        its lease when ``held`` (lease -> instance id, what the lease holders still hold) names it, else idle
        (or starting); instances whose actor is gone are not taken back (the plan re-provisions them), and
        a held lease whose actor is gone comes back as a broken instance, so its holder gets a clear error
        and its release is still accepted. Idle actors due for recycling are left out and listed in
        ``retired``, for the driver to kill."""
        plane = cls(pools, clock, prefix, on_idle)
        lease_of = {iid: lease for lease, iid in held.items()}
        for a in actors:
            if a.pool not in pools:
                continue
            inst = Instance(a.id, a.pool, a.handle, "starting", a.episodes, None, a.pid)
            plane.instances[a.id] = inst
            plane._counts[a.pool]["starting"] += 1
            lease = lease_of.pop(a.id, None)
            if lease is not None:
                inst.lease = lease
                plane.leases[lease] = a.id
                plane._set(inst, "busy")
            elif a.state == "up":
                recycle = plane.pools[a.pool].recycle_after
                if recycle and a.episodes >= recycle:  # due for recycling: the driver kills it
                    plane._forget(inst)
                    plane.retired.append(a)
                    plane.counters["recycled"] += 1
                else:
                    plane._set(inst, "idle")
        for iid, lease in lease_of.items():  # held, but its actor died with the old plane
            pool = iid.removeprefix(prefix).rsplit("-", 1)[0]
            if pool in pools:
                inst = Instance(iid, pool, None, "starting", 0, lease)
                plane.instances[iid] = inst
                plane._counts[pool]["starting"] += 1
                plane.leases[lease] = iid
                plane._set(inst, "broken")
        plane.counters["rebuilt"] += 1
        return plane

    def kick(self) -> None:
        """Grants whatever is idle to whoever waits (after a rebuild)."""
        for name in self.pools:
            self._dispatch(name)
