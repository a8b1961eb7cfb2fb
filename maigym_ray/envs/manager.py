"""EnvManager: the control plane of environment instances, run as an async Ray actor.

It owns warm pools (one per configured platform/backend), provisions instances in the background, checks the
health of idle ones, replaces failed ones, recycles instances after N episodes, and puts a time limit on every
operation. Callers lease instances with ``request`` and then use ``reset/observe/step/evaluate`` with the lease
id, or fetch the instance's actor with ``actor(lease)`` and talk to it directly (the data plane), so the
manager is never a per-step bottleneck.

Failure semantics: an instance whose operation fails with a backend error, a dead actor or a timeout is marked
broken and replaced in the background; the caller gets an :class:`InfraError` subclass, never a silent 0.
Task errors (unknown task, bad verifier) are the caller's and leave the instance healthy.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from maigym_ray.config import BROWSER_BACKENDS, EnvManagerConfig, PoolConfig, validate_manager_config
from maigym_ray.envs.actor import EnvActor
from maigym_ray.envs.metrics import LatencyHistogram
from maigym_ray.envs.node_services import NodeServices
from maigym_ray.errors import (
    BackendError,
    ConfigError,
    EnvTimeoutError,
    EnvUnavailableError,
    InfraError,
    LeaseError,
    TaskError,
)
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.types import Action, Observation, Reward, StepResult, TaskSpec

_DEAD = (RayActorError,)


def _default_actor_options(pool: PoolConfig) -> dict[str, Any]:
    # Without a topology (a test, a benchmark): the pool's own CPUs, on any node.
    return dict(num_cpus=pool.num_cpus, max_concurrency=8, runtime_env={"env_vars": dict(pool.env_vars)})


@dataclass
class _Instance:
    id: str
    pool: str
    handle: Any
    state: str = "starting"  # starting | idle | busy | broken
    episodes: int = 0
    lease: str | None = None
    pid: int = 0


class EnvManager:
    """Leases environment instances and exposes request, observe, reset, step, evaluate and release."""

    def __init__(
        self,
        cfg: EnvManagerConfig,
        tasks: TaskPool | None = None,
        actor_options: dict[str, dict[str, Any]] | None = None,
        node_options: dict[str, Any] | None = None,
    ) -> None:
        """``actor_options`` (per pool name) and ``node_options`` are the Ray options of the env actors and the
        node services, built by maigym_ray/runtime/placement.py from the topology; without them every actor
        reserves its pool's ``num_cpus`` on any node (tests, benchmarks)."""
        validate_manager_config(cfg)
        self.cfg = cfg
        self._actor_options = actor_options or {}
        self._node_options = node_options or {"max_concurrency": 1000}
        self.tasks = tasks or TaskPool([])
        self._instances: dict[str, _Instance] = {}
        self._leases: dict[str, str] = {}
        self._demand: Counter[str] = Counter()
        self._changed = asyncio.Condition()
        self._hists: dict[str, LatencyHistogram] = {}
        self._counters: Counter[str] = Counter()
        self._node: Any = None
        self._loops: list[asyncio.Task[None]] = []
        self._creating: set[asyncio.Task[None]] = set()
        self._closing = False

    # -- lifecycle ------------------------------------------------------------------------------------------
    async def start(self, wait: bool = True) -> dict[str, Any]:
        """Starts provisioning and health loops; with ``wait``, returns once every warm pool is full."""
        await self._ensure_node_services()
        if not self._loops:
            self._loops = [
                asyncio.ensure_future(self._provision_loop()),
                asyncio.ensure_future(self._health_loop()),
            ]
        t0 = time.perf_counter()
        if wait:
            await self.wait_ready()
        return {"ready_s": time.perf_counter() - t0}

    async def _ensure_node_services(self) -> None:
        """Starts (or restarts, if its actor died) the node's shared services: apps and, if shared, Chromium."""
        if self._node is not None:
            try:
                await asyncio.wait_for(self._node.__ray_ready__.remote(), 10)
                return
            except Exception:
                self._counters["node_services_lost"] += 1
        web = [p for p in self.cfg.pools.values() if p.backend in BROWSER_BACKENDS]
        self._node = (
            ray.remote(NodeServices)
            .options(**self._node_options)
            .remote(
                self.cfg.app_bind,
                browser=any(p.web.browser == "shared" for p in web),
                chromium=next((p.web.executable for p in web), ""),
            )
        )
        self._counters["node_services_starts"] += 1

    async def wait_ready(self, timeout_s: float | None = None) -> None:
        """Waits until every pool has ``target_size`` idle instances."""
        deadline = time.monotonic() + (timeout_s or self.cfg.start_timeout_s * 2)

        def full() -> bool:
            return all(self._count(name, "idle") >= p.target_size for name, p in self.cfg.pools.items())

        async with self._changed:
            while not full():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EnvUnavailableError(f"warm pools not full after waiting: {self._pool_sizes()}")
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except TimeoutError:
                    pass

    async def shutdown(self) -> None:
        """Stops the loops and every instance and the shared browser."""
        self._closing = True
        for t in self._loops:
            t.cancel()
        await asyncio.gather(*(self._kill(inst, graceful=True) for inst in list(self._instances.values())))
        if self._node is not None:
            try:
                await asyncio.wait_for(self._node.stop.remote(), 10)
            except Exception:
                pass
            ray.kill(self._node)

    # -- pools ----------------------------------------------------------------------------------------------
    def _count(self, pool: str, state: str) -> int:
        return sum(1 for i in self._instances.values() if i.pool == pool and i.state == state)

    def _pool_sizes(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for name in self.cfg.pools:
            sizes = {s: self._count(name, s) for s in ("starting", "idle", "busy", "broken")}
            sizes["size"] = sum(sizes.values())
            out[name] = sizes
        return out

    def _pool_for(self, platform: str) -> str:
        for name, p in self.cfg.pools.items():
            if p.platform == platform:
                return name
        valid = sorted({p.platform for p in self.cfg.pools.values()})
        raise ConfigError(f"no pool serves platform {platform!r}; configured platforms: {', '.join(valid)}")

    async def _provision_loop(self) -> None:
        while not self._closing:
            for name, pool in self.cfg.pools.items():
                live = sum(1 for i in self._instances.values() if i.pool == name and i.state != "broken")
                idle_or_starting = self._count(name, "idle") + self._count(name, "starting")
                want = max(pool.target_size, self._demand[name]) - idle_or_starting
                for _ in range(max(0, min(want, pool.max_size - live))):
                    task = asyncio.ensure_future(self._create(name, pool))
                    self._creating.add(task)  # keep a reference: the loop only holds tasks weakly
                    task.add_done_callback(self._creating.discard)
            async with self._changed:
                try:
                    await asyncio.wait_for(self._changed.wait(), 0.5)
                except TimeoutError:
                    pass

    async def _create(self, name: str, pool: PoolConfig) -> None:
        iid = f"{name}-{uuid.uuid4().hex[:8]}"
        handle = (
            ray.remote(EnvActor)
            .options(**self._actor_options.get(name, _default_actor_options(pool)))
            .remote()
        )
        inst = _Instance(iid, name, handle)
        self._instances[iid] = inst
        t0 = time.perf_counter()
        try:
            info = await asyncio.wait_for(
                handle.start.remote(iid, pool, self.cfg.apps, self.cfg.app_bind, self._node),
                self.cfg.start_timeout_s,
            )
            inst.pid = info["pid"]
            inst.state = "idle"
            self._counters["started"] += 1
            self._hist("start").observe(time.perf_counter() - t0)
        except Exception as exc:  # any start failure: drop it; the loop retries with a fresh actor
            self._counters["start_failures"] += 1
            self._counters[f"start_failure:{type(exc).__name__}"] += 1
            self._instances.pop(iid, None)
            ray.kill(handle, no_restart=True)
            self._reclaim(iid)
            await asyncio.sleep(min(5.0, 0.5 * self._counters["start_failures"]))
        await self._notify()

    async def _kill(self, inst: _Instance, graceful: bool = False) -> None:
        self._instances.pop(inst.id, None)
        if graceful:
            try:
                await asyncio.wait_for(inst.handle.close.remote(), 5)
            except Exception:
                pass
        try:
            ray.kill(inst.handle, no_restart=True)
        except Exception:
            pass
        self._reclaim(inst.id)

    def _reclaim(self, iid: str) -> None:
        """Has the node's services close what instance ``iid`` held there (its app namespace, its page in the
        shared browser). A graceful close did it already; an actor killed by a signal, a crash or a timeout
        never does, and each leftover namespace holds a server, its sockets and ~0.5 MB of app state.
        Fire-and-forget: a dead services actor took them with it."""
        if self._node is not None:
            self._node.release.remote(iid)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _health_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.cfg.health_interval_s)
            await self._ensure_node_services()
            idle = [i for i in self._instances.values() if i.state == "idle"]
            results = await asyncio.gather(*(self._healthy(i) for i in idle))
            for inst, ok in zip(idle, results, strict=True):
                if not ok and inst.state == "idle":
                    self._counters["health_failures"] += 1
                    await self._replace(inst, "health check failed")

    async def _healthy(self, inst: _Instance) -> bool:
        try:
            return bool(await asyncio.wait_for(inst.handle.health.remote(), 5))
        except Exception:
            return False

    async def _replace(self, inst: _Instance, why: str) -> None:
        """Takes a failed instance out of service; the provisioning loop starts its replacement."""
        inst.state = "broken"
        self._counters["replaced"] += 1
        self._counters[f"replaced:{why.split(':')[0]}"] += 1
        if inst.lease is None:
            await self._kill(inst)
        else:  # keep the record so the lease holder gets a clear error; kill the actor now
            try:
                ray.kill(inst.handle, no_restart=True)
            except Exception:
                pass
            self._reclaim(inst.id)
        await self._notify()

    # -- leases ---------------------------------------------------------------------------------------------
    async def request(self, n: int = 1, platform: str = "web", timeout_s: float | None = None) -> list[str]:
        """Leases ``n`` instances of ``platform``; waits (provisioning on demand) up to the request timeout."""
        name = self._pool_for(platform)
        if n > self.cfg.pools[name].max_size:
            raise ConfigError(f"request for {n} instances exceeds pool {name!r} max_size")
        deadline = time.monotonic() + (timeout_s or self.cfg.request_timeout_s)
        leases: list[str] = []
        self._demand[name] += n
        t0 = time.perf_counter()
        try:
            async with self._changed:
                self._changed.notify_all()
                while len(leases) < n:
                    for inst in self._instances.values():
                        if len(leases) < n and inst.pool == name and inst.state == "idle":
                            lease = uuid.uuid4().hex
                            inst.state, inst.lease = "busy", lease
                            self._leases[lease] = inst.id
                            leases.append(lease)
                            self._demand[name] -= 1
                    if len(leases) < n:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise EnvUnavailableError(
                                f"only {len(leases)} of {n} {platform} instances free after waiting; "
                                f"pool: {self._pool_sizes()[name]}"
                            )
                        try:
                            await asyncio.wait_for(self._changed.wait(), left)
                        except TimeoutError:
                            pass
        except BaseException:
            for lease in leases:
                await self.release(lease)
            raise
        finally:
            self._demand[name] -= n - len(leases)
        self._hist("request").observe(time.perf_counter() - t0)
        return leases

    def _inst(self, lease: str) -> _Instance:
        iid = self._leases.get(lease)
        if iid is None:
            raise LeaseError(f"unknown or released lease {lease!r}")
        inst = self._instances.get(iid)
        if inst is None or inst.state == "broken":
            raise EnvUnavailableError(
                f"the instance behind lease {lease[:8]} failed and was replaced; release it"
            )
        return inst

    async def release(self, lease: str) -> None:
        """Returns an instance; recycles it after ``recycle_after`` episodes; forgets a broken one."""
        iid = self._leases.pop(lease, None)
        if iid is None:
            return
        inst = self._instances.get(iid)
        if inst is None:
            return
        inst.lease = None
        pool = self.cfg.pools[inst.pool]
        if inst.state == "broken":
            await self._kill(inst)
        elif pool.recycle_after and inst.episodes >= pool.recycle_after:
            self._counters["recycled"] += 1
            await self._kill(inst, graceful=True)
        else:
            inst.state = "idle"
        await self._notify()

    async def report_failure(self, lease: str, reason: str) -> None:
        """A caller on the direct path saw the leased instance fail: take it out of service and replace it."""
        iid = self._leases.get(lease)
        inst = self._instances.get(iid) if iid else None
        if inst is not None and inst.state != "broken":
            await self._replace(inst, f"reported:{reason}")

    async def actor(self, lease: str) -> Any:
        """The leased instance's EnvActor handle, for callers that talk to it directly."""
        return self._inst(lease).handle

    # -- the five operations --------------------------------------------------------------------------------
    def _hist(self, op: str) -> LatencyHistogram:
        if op not in self._hists:
            self._hists[op] = LatencyHistogram()
        return self._hists[op]

    async def _call(self, lease: str, op: str, timeout_s: float, *args: Any) -> Any:
        inst = self._inst(lease)
        t0 = time.perf_counter()
        try:
            return await asyncio.wait_for(getattr(inst.handle, op).remote(*args), timeout_s)
        except TaskError:
            raise
        except (TimeoutError, GetTimeoutError) as exc:
            self._counters[f"timeouts:{op}"] += 1
            await self._replace(inst, f"timeout:{op}")
            raise EnvTimeoutError(
                f"{op} on {inst.id} took longer than {timeout_s}s; instance replaced"
            ) from exc
        except _DEAD as exc:
            self._counters[f"failures:{op}"] += 1
            await self._replace(inst, f"actor died:{op}")
            raise EnvUnavailableError(
                f"{op}: instance {inst.id} died ({type(exc).__name__}); replaced"
            ) from exc
        except (BackendError, InfraError) as exc:
            self._counters[f"failures:{op}"] += 1
            await self._replace(inst, f"backend error:{op}")
            raise BackendError(f"{op} on {inst.id} failed: {str(exc).splitlines()[-1][:300]}") from exc
        finally:
            self._hist(op).observe(time.perf_counter() - t0)

    async def reset(self, lease: str, task: TaskSpec | str) -> Observation:
        """Resets the leased instance to ``task`` (a TaskSpec, or the id of a task in the manager's pool)."""
        spec = self.tasks.get(task) if isinstance(task, str) else task
        inst = self._inst(lease)
        inst.episodes += 1
        return await self._call(lease, "reset", self.cfg.reset_timeout_s, spec)

    async def observe(self, lease: str) -> Observation:
        """The leased instance's current screen."""
        return await self._call(lease, "observe", self.cfg.observe_timeout_s)

    async def step(self, lease: str, action: str | Action) -> StepResult:
        """One action (grammar text or a parsed Action); agent mistakes come back in the observation."""
        return await self._call(lease, "step", self.cfg.step_timeout_s, action)

    async def evaluate(self, lease: str) -> Reward:
        """The task's verifier on the leased instance's state."""
        return await self._call(lease, "evaluate", self.cfg.evaluate_timeout_s)

    async def state(self, lease: str) -> dict[str, Any]:
        """The leased instance's app states (for validation and tests)."""
        return await self._call(lease, "state", self.cfg.observe_timeout_s)

    # -- introspection --------------------------------------------------------------------------------------
    async def metrics(self) -> dict[str, Any]:
        """Pool sizes, counters and per-operation latency histograms."""
        return {
            "pools": self._pool_sizes(),
            "counters": dict(self._counters),
            "latency": {op: h.summary() for op, h in self._hists.items()},
        }

    async def instances(self) -> list[dict[str, Any]]:
        """Every instance: id, pool, state, pid, episodes and whether it is leased."""
        return [
            {
                "id": i.id,
                "pool": i.pool,
                "state": i.state,
                "pid": i.pid,
                "episodes": i.episodes,
                "leased": i.lease is not None,
            }
            for i in self._instances.values()
        ]

    async def service_held(self) -> dict[str, int]:
        """How many app namespaces and shared-browser pages the node's services hold (one each per live web
        instance; more is a leak)."""
        return await self._node.held.remote() if self._node is not None else {}

    async def service_pids(self) -> dict[str, int]:
        """Pids of the node's shared services process and of its Chromium (0 when not shared)."""
        return await self._node.pids.remote() if self._node is not None else {}
