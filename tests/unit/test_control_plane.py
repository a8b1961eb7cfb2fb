"""The control plane's lease invariants under random interleavings (Hypothesis state machines), the
coordinator's shard recovery, and the simulation's ledger. Pure Python: no Ray, no clock but a counter."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from maigym_ray.config import EnvManagerConfig, PoolConfig, ShardingConfig, validate_manager_config
from maigym_ray.envs.control import ActorState, ControlPlane
from maigym_ray.envs.coordinator import Coordinator, shard_count, split_pools
from maigym_ray.errors import ConfigError, LeaseError
from maigym_ray.testing.scale_sim import ScaleSim, SimWorkload, fleet
from maigym_ray.testing.sim_backend import SimBackendConfig, SimPlatformConfig

pytestmark = pytest.mark.unit

RECYCLE = 3
MACHINE = settings(
    max_examples=40, stateful_step_count=40, deadline=None, suppress_health_check=list(HealthCheck)
)


def pools(size: int = 4, target: int = 2) -> dict[str, PoolConfig]:
    return {
        "web": PoolConfig(backend="fake", target_size=target, max_size=size, recycle_after=RECYCLE),
        "phone": PoolConfig(
            platform="android", backend="fake", target_size=1, max_size=size, recycle_after=RECYCLE
        ),
    }


class PlaneMachine(RuleBasedStateMachine):
    """One ControlPlane; callers lease, reset, release, give up, report failures; instances start, fail to
    start and fail health checks, in any order."""

    def __init__(self) -> None:
        super().__init__()
        ticks = itertools.count()
        self.plane = ControlPlane(pools(), clock=lambda: float(next(ticks)))
        self.held: dict[str, str] = {}  # lease -> instance, as the callers see it
        self.waiters: list = []
        self.granted_order: dict[str, list[float]] = {"web": [], "phone": []}

    def _grant(self, w) -> None:
        for lease in w.leases:
            iid = self.plane.leases[lease]
            assert iid not in self.held.values(), "an instance handed to two holders"
            assert self.plane.instances[iid].episodes < RECYCLE, "leased after recycle_after episodes"
            self.held[lease] = iid
        self.granted_order[w.pool].append(w.since)

    @rule()
    def provision(self) -> None:
        for pool, n in self.plane.provision_plan().items():
            for _ in range(n):
                self.plane.new_instance(pool)

    @rule(data=st.data(), ok=st.booleans())
    def bring_up(self, data, ok) -> None:
        starting = [i.id for i in self.plane.instances.values() if i.state == "starting"]
        if starting:
            iid = data.draw(st.sampled_from(starting))
            self.plane.started(iid) if ok else self.plane.start_failed(iid)

    @rule(pool=st.sampled_from(["web", "phone"]), n=st.integers(1, 2))
    def request(self, pool, n) -> None:
        w = self.plane.request(pool, n)
        if w.done:
            self._grant(w)
        else:
            w.on_done = self._grant
            self.waiters.append(w)

    @rule(data=st.data())
    def give_up(self, data) -> None:
        live = [w for w in self.waiters if not w.done and not w.cancelled]
        if live:
            self.plane.cancel(data.draw(st.sampled_from(live)))

    @precondition(lambda self: self.held)
    @rule(data=st.data(), episodes=st.integers(0, 2))
    def use_and_release(self, data, episodes) -> None:
        lease = data.draw(st.sampled_from(list(self.held)))
        iid = self.held.pop(lease)
        inst = self.plane.instances[iid]
        broken = inst.state == "broken"
        for _ in range(0 if broken else episodes):
            self.plane.begin_episode(lease)
        outcome, back = self.plane.release(lease)
        assert back is inst
        if broken:
            assert outcome == "drop" and iid not in self.plane.instances
        elif inst.episodes >= RECYCLE:
            assert outcome == "recycle" and iid not in self.plane.instances
        else:  # back in the pool: idle, or already handed to a waiting caller under a new lease
            assert outcome == "idle" and inst.state in ("idle", "busy")
            assert inst.lease != lease
        with pytest.raises(LeaseError):
            self.plane.lookup(lease)
        assert self.plane.release(lease) == ("unknown", None)  # a second release is a no-op

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def report_failure(self, data) -> None:
        lease = data.draw(st.sampled_from(list(self.held)))
        self.plane.report_failure(lease, "test")
        assert self.plane.instances[self.held[lease]].state == "broken"

    @rule(limit=st.integers(0, 3), fail=st.booleans())
    def health_round(self, limit, fail) -> None:
        for inst in self.plane.health_batch(limit):
            assert inst.state == "idle"
            self.plane.health_result(inst.id, not fail)

    @invariant()
    def one_holder_per_instance(self) -> None:
        # what callers hold, and what waiting callers were partly granted (a 2-instance request)
        partial = [ls for w in self.waiters if not w.done and not w.cancelled for ls in w.leases]
        assert set(partial).isdisjoint(self.held)
        assert set(self.plane.leases) == set(self.held) | set(partial)
        assert self.held.items() <= self.plane.leases.items()
        owners = list(self.plane.leases.values())
        assert len(set(owners)) == len(owners)
        for lease, iid in self.plane.leases.items():
            assert self.plane.instances[iid].lease == lease

    @invariant()
    def counts_match(self) -> None:
        for name in self.plane.pools:
            for state in ("starting", "idle", "busy", "broken"):
                real = sum(1 for i in self.plane.instances.values() if i.pool == name and i.state == state)
                assert self.plane.count(name, state) == real
            idle = [i.id for i in self.plane.instances.values() if i.pool == name and i.state == "idle"]
            assert sorted(idle) == sorted(self.plane._idle[name])
            # no caller waits while an instance of its pool is idle
            if self.plane._idle[name]:
                assert not any(not w.done and not w.cancelled for w in self.plane._waiters[name])

    @invariant()
    def first_come_first_served(self) -> None:
        for order in self.granted_order.values():  # per pool, callers complete in the order they asked
            assert order == sorted(order)


TestPlaneInterleavings = PlaneMachine.TestCase
TestPlaneInterleavings.settings = MACHINE


class CoordinatorMachine(RuleBasedStateMachine):
    """Three shards under a coordinator, simulated actors that remember their state, and shards killed and
    rebuilt at any point: no lease is lost or handed out twice."""

    def __init__(self) -> None:
        super().__init__()
        self.coord = Coordinator(pools(size=6, target=3), ShardingConfig(shards=3), clock=lambda: 0.0)
        self.actors: dict[str, ActorState] = {}
        self.held: dict[str, str] = {}

    def _grant(self, w) -> None:
        for lease in w.leases:
            iid = self.coord.held[lease][1]
            assert iid not in self.held.values(), "an instance handed to two holders"
            assert self.actors[iid].episodes < RECYCLE, "leased after recycle_after episodes"
            self.held[lease] = iid

    def _kill_actor(self, iid: str) -> None:
        self.actors.pop(iid, None)

    @rule()
    def provision(self) -> None:
        for plane in self.coord.shards:
            if plane is None:
                continue
            for pool, n in plane.provision_plan().items():
                for _ in range(n):
                    inst = plane.new_instance(pool)
                    self.actors[inst.id] = ActorState(inst.id, pool, "starting")

    @rule(data=st.data(), ok=st.booleans())
    def bring_up(self, data, ok) -> None:
        starting = [a.id for a in self.actors.values() if a.state == "starting"]
        if not starting:
            return
        iid = data.draw(st.sampled_from(starting))
        plane = self.coord.shards[Coordinator.shard_of(iid)]
        if ok:
            self.actors[iid] = ActorState(iid, self.actors[iid].pool, "up")
            if plane is not None and not plane.started(iid):
                self._kill_actor(iid)
        else:
            self._kill_actor(iid)
            if plane is not None:
                plane.start_failed(iid)

    @rule(pool=st.sampled_from(["web", "phone"]))
    def request(self, pool) -> None:
        w = self.coord.request(pool, 1)
        if w.done:
            self._grant(w)
        else:
            w.on_done = self._grant

    @precondition(lambda self: self.held)
    @rule(data=st.data(), reset_fails=st.booleans())
    def episode_and_release(self, data, reset_fails) -> None:
        lease = data.draw(st.sampled_from(list(self.held)))
        iid = self.held.pop(lease)
        if iid in self.actors:  # the actor counts its episode (what a rebuild reads back)
            a = self.actors[iid]
            self.actors[iid] = ActorState(a.id, a.pool, a.state, a.episodes + 1)
            self.coord.begin_episode(lease)
        if reset_fails:
            dead = self.coord.report_failure(lease, "reset")
            if dead is not None:
                self._kill_actor(dead)
        outcome, inst = self.coord.release(lease)
        assert outcome in ("idle", "recycle", "drop", "deferred")
        if outcome in ("recycle", "drop"):
            self._kill_actor(inst.id)
        assert self.coord.release(lease) == ("unknown", None)

    @rule(k=st.integers(0, 2))
    def kill_shard(self, k) -> None:
        self.coord.kill_shard(k)

    @rule(k=st.integers(0, 2))
    def rebuild_shard(self, k) -> None:
        if self.coord.shards[k] is None:
            states = [a for a in self.actors.values() if Coordinator.shard_of(a.id) == k]
            plane = self.coord.rebuild_shard(k, states)
            for a in plane.retired:
                self._kill_actor(a.id)

    @invariant()
    def no_lease_lost_or_doubled(self) -> None:
        assert len(set(self.held.values())) == len(self.held)
        assert {lease: iid for lease, (_, iid) in self.coord.held.items()} == self.held
        for plane in self.coord.shards:
            if plane is None:
                continue
            mine = {lease: iid for lease, iid in self.held.items() if lease.startswith(plane.prefix)}
            assert plane.leases == mine
            for inst in plane.instances.values():
                if inst.state == "idle":
                    assert inst.id not in self.held.values()
                    assert inst.id in self.actors, "an idle instance without an actor"


TestCoordinatorInterleavings = CoordinatorMachine.TestCase
TestCoordinatorInterleavings.settings = MACHINE


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), kill_at=st.floats(0.1, 0.9), shard=st.integers(0, 2))
def test_simulation_with_a_shard_killed_loses_and_doubles_no_lease(seed, kill_at, shard):
    sim = ScaleSim(
        fleet(300, {"web": 0.6, "desktop": 0.25, "android": 0.15}, recycle_after=3),
        ShardingConfig(shards=3),
        SimBackendConfig(seed=seed, failure_rate=0.05, health_failure_rate=0.01),
        SimWorkload(duration_s=300, episode_median_s=20, kill_shard=shard, kill_at=kill_at),
    )
    r = sim.run()
    assert (r.lost_leases, r.double_leases) == (0, 0)
    assert r.counters["shards_rebuilt"] == 1 and r.counters["recycled"] > 0
    assert r.leases > 300
    assert r.counters["failed_resets"] > 0 and r.counters["request_timeouts"] >= 0


def test_a_failed_lease_ledger_is_detected():
    """The audit can fail: a lease the control plane forgets shows up as lost."""
    sim = ScaleSim(fleet(40, {"web": 1.0}), ShardingConfig(shards=2), workload=SimWorkload(duration_s=30))
    sim.run()
    lease = next(iter(sim.coord.held))
    del sim.coord.held[lease]
    sim.lost = 0
    sim._audit()
    assert sim.lost >= 1


def test_bringup_is_limited_by_hosts_not_the_control_plane():
    one = {
        "web": SimPlatformConfig(reset_median_s=10.0, sigma=0.0, instances_per_host=8, bringups_per_host=2)
    }
    cfg = SimBackendConfig(platforms=one, failure_rate=0.0, slow_rate=0.0)
    r = ScaleSim(fleet(64, {"web": 1.0}), backend=cfg).run(lease_phase=False)
    assert r.hosts == 8 and r.bringup_s == pytest.approx(40.0)  # 8 per host, 2 at a time, 10 s each


def test_health_checks_rotate_through_idle_instances():
    plane = ControlPlane({"web": PoolConfig(backend="fake", target_size=5, max_size=5)})
    for _ in range(5):
        plane.started(plane.new_instance("web").id)
    seen = [i.id for _ in range(3) for i in plane.health_batch(2)]
    assert len(set(seen[:5])) == 5  # two per round, every instance before any twice


def test_waiters_are_served_in_order_and_time_out():
    plane = ControlPlane({"web": PoolConfig(backend="fake", target_size=0, max_size=2)})
    first, second, third = (plane.request("web") for _ in range(3))
    plane.cancel(second)  # gave up at its timeout
    plane.started(plane.new_instance("web").id)
    plane.started(plane.new_instance("web").id)
    assert first.done and not second.done and third.done
    assert plane.counters["request_timeouts"] == 1


def test_a_coordinator_waiter_that_gives_up_returns_its_partial_grant():
    coord = Coordinator(
        {"web": PoolConfig(backend="fake", target_size=0, max_size=3)}, ShardingConfig(shards=1)
    )
    plane = coord.shards[0]
    plane.started(plane.new_instance("web").id)
    w = coord.request("web", 2)  # one idle instance: granted one, owed one
    assert len(w.leases) == 1 and coord.waiting("web") == 1 and plane.extra_demand["web"] == 1
    coord.cancel(w)
    assert w.cancelled and coord.waiting("web") == 0 and plane.extra_demand["web"] == 0
    assert coord.held == {} and plane.idle_count("web") == 1  # the partial grant is back in the pool
    assert coord.counters["request_timeouts"] == 1
    coord.cancel(w)  # a second give-up is a no-op
    assert coord.counters["request_timeouts"] == 1


def test_shards_split_pools_and_route_releases():
    big = {"web": PoolConfig(backend="fake", target_size=10, max_size=11)}
    assert shard_count(big, ShardingConfig(instances_per_shard=4)) == 3
    parts = [split_pools(big, 3, k)["web"] for k in range(3)]
    assert sum(p.max_size for p in parts) == 11 and sum(p.target_size for p in parts) == 10
    coord = Coordinator(big, ShardingConfig(shards=3))
    for k, plane in enumerate(coord.shards):
        plane.started(plane.new_instance("web").id)
        assert coord.request("web").leases[0].startswith(f"{k}.")  # rotates over the shards


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"shards": -1}, "shards"),
        ({"instances_per_shard": 0}, "instances_per_shard"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
    ],
)
def test_bad_sharding_raises_config_error(bad, field):
    with pytest.raises(ConfigError, match=rf"sharding\.{field}="):
        ShardingConfig(**bad)


def test_bad_sim_and_health_configs_raise_config_error():
    with pytest.raises(ConfigError, match="failure_rate"):
        SimBackendConfig(failure_rate=1.5)
    with pytest.raises(ConfigError, match="bringups_per_host"):
        SimBackendConfig(platforms={"web": SimPlatformConfig(bringups_per_host=0)})
    with pytest.raises(ConfigError, match="health_batch"):
        validate_manager_config(EnvManagerConfig(apps=["notes"], health_batch=-1))
