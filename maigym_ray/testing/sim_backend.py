"""SimBackend: simulated environment instances on simulated hosts, for the control plane at scale.

Latencies follow the reference's measurements: a reset takes a lognormal time around the platform's median
(Android 165 s, desktop 37 s, browser 6 s), a share of operations are slow outliers (``slow_factor`` times
longer) and a share fail. A bring-up costs one reset's time (a fresh instance must reach a task's initial
state too). Each host holds ``instances_per_host`` instances and brings up at most ``bringups_per_host`` at
once; the rest wait in the host's queue, so a provisioning storm is limited by hosts, not by the control plane.

The backend is driven by callbacks on a :class:`~maigym_ray.testing.sim_clock.SimClock`; its actors remember
their pool, state and episodes, which is what a rebuilt control-plane shard reads back (``actor_states``).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from maigym_ray.envs.control import ActorState
from maigym_ray.errors import ConfigError
from maigym_ray.testing.sim_clock import SimClock


@dataclass
class SimPlatformConfig:
    """One platform's simulated latencies and host limits."""

    #: median seconds of a reset (and of a bring-up), lognormally distributed.
    reset_median_s: float = 6.0
    #: lognormal sigma of reset and bring-up times (0.2: 90% within about x0.72..x1.39 of the median).
    sigma: float = 0.2
    #: instances one host holds.
    instances_per_host: int = 64
    #: bring-ups one host runs at once; more wait in the host's queue.
    bringups_per_host: int = 16


def reference_platforms() -> dict[str, SimPlatformConfig]:
    """The reference's reset medians. Host limits (ours, the reference states none): an Android host runs its 8
    emulators' bring-ups at once (one wave), a desktop host 8 of its 16 VMs (two waves), a browser host 16 of
    its 64 pages (four waves)."""
    return {
        "android": SimPlatformConfig(reset_median_s=165.0, instances_per_host=8, bringups_per_host=8),
        "desktop": SimPlatformConfig(reset_median_s=37.0, instances_per_host=16, bringups_per_host=8),
        "web": SimPlatformConfig(reset_median_s=6.0, instances_per_host=64, bringups_per_host=16),
    }


@dataclass
class SimBackendConfig:
    """The simulated backend: per-platform latencies and host limits, failures and outliers."""

    #: per platform (android, desktop, web): latencies and host limits.
    platforms: dict[str, SimPlatformConfig] = field(default_factory=reference_platforms)
    #: probability that a bring-up or a reset fails (a failed bring-up is retried by the control plane; a
    #: failed reset is reported by its lease holder and the instance replaced).
    failure_rate: float = 0.02
    #: probability that a bring-up or reset is a slow outlier, and how many times longer it then takes.
    slow_rate: float = 0.01
    slow_factor: float = 2.5
    #: probability that a health check of an idle instance fails.
    health_failure_rate: float = 0.0005
    #: random seed (runs are reproducible).
    seed: int = 0

    def __post_init__(self) -> None:
        """Checks a SimBackendConfig, raising :class:`ConfigError` naming the field."""
        for name in ("failure_rate", "slow_rate", "health_failure_rate"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"sim.{name}={getattr(self, name)}: need 0 <= value < 1")
        if self.slow_factor < 1.0:
            raise ConfigError(f"sim.slow_factor={self.slow_factor}: need >= 1")
        for name, p in self.platforms.items():
            if p.reset_median_s <= 0 or p.sigma < 0:
                raise ConfigError(f"sim.platforms.{name}: need reset_median_s > 0 and sigma >= 0")
            if p.instances_per_host < 1 or p.bringups_per_host < 1:
                raise ConfigError(
                    f"sim.platforms.{name}: need instances_per_host >= 1 and bringups_per_host >= 1"
                )


class _Host:
    def __init__(self, name: str, platform: SimPlatformConfig) -> None:
        self.name = name
        self.cfg = platform
        self.instances = 0
        self.active = 0
        self.queue: deque[tuple[str, Callable[[bool], None]]] = deque()


@dataclass(eq=False)
class SimActor:
    """One simulated env actor: where it runs and what it knows about itself."""

    id: str
    pool: str
    platform: str
    host: _Host
    owner: str
    state: str = "starting"  # starting | up
    episodes: int = 0


class SimBackend:
    """Simulated instances on simulated hosts; see the module docstring."""

    def __init__(self, clock: SimClock, cfg: SimBackendConfig | None = None) -> None:
        self.cfg = cfg or SimBackendConfig()
        self.clock = clock
        self.rng = random.Random(self.cfg.seed)
        self.actors: dict[str, SimActor] = {}
        self._hosts: dict[tuple[str, str], list[_Host]] = {}
        self._next: dict[tuple[str, str], int] = {}

    def add_hosts(self, owner: str, platform: str, instances: int) -> int:
        """Enough hosts of ``platform`` for ``instances`` instances, owned by ``owner`` (a shard); returns
        how many."""
        if platform not in self.cfg.platforms:
            raise ConfigError(f"sim: no platform {platform!r}; configured: {', '.join(self.cfg.platforms)}")
        p = self.cfg.platforms[platform]
        hosts = self._hosts.setdefault((owner, platform), [])
        n = math.ceil(instances / p.instances_per_host)
        hosts.extend(_Host(f"{owner}/{platform}/{len(hosts) + i}", p) for i in range(n))
        self._next.setdefault((owner, platform), 0)
        return n

    def hosts(self) -> int:
        """How many hosts there are."""
        return sum(len(h) for h in self._hosts.values())

    def duration(self, platform: str) -> float:
        """One reset's (or bring-up's) simulated seconds on ``platform``."""
        p = self.cfg.platforms[platform]
        d = p.reset_median_s * math.exp(self.rng.gauss(0.0, p.sigma))
        if self.rng.random() < self.cfg.slow_rate:
            d *= self.cfg.slow_factor
        return d

    def bring_up(
        self, iid: str, pool: str, platform: str, owner: str, on_done: Callable[[bool], None]
    ) -> bool:
        """Starts instance ``iid`` on the next host of ``owner`` with room (round robin); ``on_done(ok)`` when
        it is up or failed. False when every host of the owner is full."""
        key = (owner, platform)
        hosts = self._hosts.get(key, [])
        for _ in range(len(hosts)):
            i = self._next[key]
            self._next[key] = (i + 1) % len(hosts)
            host = hosts[i]
            if host.instances < host.cfg.instances_per_host:
                host.instances += 1
                self.actors[iid] = SimActor(iid, pool, platform, host, owner)
                host.queue.append((iid, on_done))
                self._pump(host)
                return True
        return False

    def _pump(self, host: _Host) -> None:
        while host.active < host.cfg.bringups_per_host and host.queue:
            iid, on_done = host.queue.popleft()
            actor = self.actors.get(iid)
            if actor is None:  # killed while it waited
                continue
            host.active += 1
            ok = self.rng.random() >= self.cfg.failure_rate
            self.clock.later(self.duration(actor.platform), self._brought_up, host, actor, ok, on_done)

    def _brought_up(self, host: _Host, actor: SimActor, ok: bool, on_done: Callable[[bool], None]) -> None:
        host.active -= 1
        self._pump(host)
        if self.actors.get(actor.id) is not actor:  # killed meanwhile
            return
        if ok:
            actor.state = "up"
        else:
            self.kill(actor.id)
        on_done(ok)

    def reset(self, iid: str, on_done: Callable[[bool], None]) -> None:
        """Resets ``iid`` (counting an episode, as EnvActor does); ``on_done(ok)`` after the simulated time."""
        actor = self.actors.get(iid)
        if actor is None or actor.state != "up":
            self.clock.later(0.0, on_done, False)
            return
        actor.episodes += 1
        ok = self.rng.random() >= self.cfg.failure_rate
        self.clock.later(self.duration(actor.platform), self._reset_done, actor, ok, on_done)

    def _reset_done(self, actor: SimActor, ok: bool, on_done: Callable[[bool], None]) -> None:
        on_done(ok and self.actors.get(actor.id) is actor)

    def health(self, iid: str) -> bool:
        """A health check's answer (instant: the simulation does not charge its round trip)."""
        actor = self.actors.get(iid)
        return actor is not None and actor.state == "up" and self.rng.random() >= self.cfg.health_failure_rate

    def kill(self, iid: str) -> None:
        """Stops ``iid`` (idempotent); its host slot is free again."""
        actor = self.actors.pop(iid, None)
        if actor is not None:
            actor.host.instances -= 1

    def actor_states(self, owner: str) -> list[ActorState]:
        """What every live actor of ``owner`` reports about itself (a shard rebuild reads these)."""
        return [
            ActorState(a.id, a.pool, a.state, a.episodes) for a in self.actors.values() if a.owner == owner
        ]
