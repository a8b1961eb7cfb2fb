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
import functools
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from maigym_ray.envs.actor import EnvActor
from maigym_ray.envs.config import EnvManagerConfig, PoolConfig
from maigym_ray.envs.control import ControlPlane, Instance
from maigym_ray.envs.group import RETIRE_AFTER, EnvGroup, GroupMember
from maigym_ray.envs.metrics import LatencyHistogram
from maigym_ray.envs.node_services import NodeServices
from maigym_ray.envs.registry import backend_kind, kind_options
from maigym_ray.envs.validation import validate_manager_config
from maigym_ray.errors import (
    BackendError,
    EnvTimeoutError,
    EnvUnavailableError,
    InfraError,
    TaskError,
)
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.types import Action, Observation, Reward, StepResult, TaskSpec

_DEAD = (RayActorError,)


def _default_actor_options(pool: PoolConfig) -> dict[str, Any]:
    # Without a topology (a test, a benchmark): the pool's own CPUs, on any node.
    return dict(num_cpus=pool.num_cpus, max_concurrency=8, runtime_env={"env_vars": dict(pool.env_vars)})


def _default_node_options(node_id: str) -> dict[str, Any]:
    # Without a topology: on the env actor's node, reserving nothing (a full node must still take it).
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {
        "num_cpus": 0,
        "max_concurrency": 1000,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
    }


@functools.cache
def remote_class(cls: type) -> Any:
    """``ray.remote(cls)``, built once per process. Ray keeps what every ``ray.remote(cls)`` call builds (a
    wrapped subclass, its method metadata and tracing wrappers: ~18 KB that are never freed), so a manager that
    called it for every env actor it started grew with every recycled, replaced or killed instance."""
    return ray.remote(cls)


def _kill_actor(handle: Any) -> None:
    try:
        ray.kill(handle, no_restart=True)
    except Exception:
        pass


class _Group:
    """The manager's record of one EnvGroup actor (a pool with ``instances_per_actor`` > 1)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.members: set[str] = set()
        self.started = 0  # instances ever placed in it
        self.retired = False  # takes no new instances; killed when its last one leaves
        self.dead = False


class EnvManager:
    """Leases environment instances and exposes request, observe, reset, step, evaluate and release.

    The bookkeeping (instances, leases, warm targets, the FIFO queue of waiting callers, health rotation,
    recycling) is a :class:`~maigym_ray.envs.control.ControlPlane`; this actor starts, checks and kills the
    env actors it decides about, and waits."""

    def __init__(
        self,
        cfg: EnvManagerConfig,
        tasks: TaskPool | None = None,
        actor_options: dict[str, dict[str, Any]] | None = None,
        node_options: Callable[[str], dict[str, Any]] | None = None,
    ) -> None:
        """``actor_options`` (per pool name) and ``node_options`` are the Ray options of the env actors and the
        node services, built by maigym_ray/runtime/placement.py from the topology; without them every actor
        reserves its pool's ``num_cpus`` on any node (tests, benchmarks)."""
        validate_manager_config(cfg)
        self.cfg = cfg
        self._actor_options = actor_options or {}
        self._node_options = node_options or _default_node_options
        self.tasks = tasks or TaskPool([])
        self.plane = ControlPlane(cfg.pools)
        self._counters = self.plane.counters
        self._changed = asyncio.Condition()
        self._hists: dict[str, LatencyHistogram] = {}
        self._nodes: dict[str, Any] = {}  # Ray node id -> the NodeServices actor on that node
        self._groups: dict[str, list[_Group]] = {}  # pool name -> its EnvGroup actors
        self._group_of: dict[str, _Group] = {}  # instance id -> the group hosting it
        self._loops: list[asyncio.Task[None]] = []
        self._creating: set[asyncio.Task[None]] = set()
        self._closing = False

    # -- lifecycle ------------------------------------------------------------------------------------------
    async def start(self, wait: bool = True) -> dict[str, Any]:
        """Starts provisioning and health loops; with ``wait``, returns once every warm pool is full."""
        if not self._loops:
            self._loops = [
                asyncio.ensure_future(self._provision_loop()),
                asyncio.ensure_future(self._health_loop()),
            ]
        t0 = time.perf_counter()
        if wait:
            await self.wait_ready()
        return {"ready_s": time.perf_counter() - t0}

    def _services_on(self, node_id: str) -> Any:
        """The shared services (apps and, if shared, Chromium) of node ``node_id``, started on first use."""
        node = self._nodes.get(node_id)
        if node is None:
            web = [kind_options(p) for p in self.cfg.pools.values() if backend_kind(p.backend).uses_browser]
            node = (
                remote_class(NodeServices)
                .options(**self._node_options(node_id))
                .remote(
                    self.cfg.app_bind,
                    browser=any(o.browser == "shared" for o in web),
                    chromium=next((o.executable for o in web), ""),
                )
            )
            self._nodes[node_id] = node
            self._counters["node_services_starts"] += 1
        return node

    async def _check_node_services(self) -> None:
        """Forgets node services that stopped answering (their node died, or the process did): the next env
        actor on that node starts a fresh set; the env actors that used the old one fail and are replaced."""

        async def answers(handle: Any) -> bool:
            try:
                await asyncio.wait_for(handle.__ray_ready__.remote(), 10)
                return True
            except Exception:
                return False

        nodes = list(self._nodes.items())
        alive = await asyncio.gather(*(answers(h) for _, h in nodes))
        for (node_id, handle), ok in zip(nodes, alive, strict=True):
            if not ok and self._nodes.get(node_id) is handle:
                self._counters["node_services_lost"] += 1
                del self._nodes[node_id]
                try:
                    ray.kill(handle, no_restart=True)
                except Exception:
                    pass

    async def wait_ready(self, timeout_s: float | None = None) -> None:
        """Waits until every pool has ``target_size`` idle instances."""
        deadline = time.monotonic() + (timeout_s or self.cfg.start_timeout_s * 2)
        async with self._changed:
            while not self.plane.full():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EnvUnavailableError(f"warm pools not full after waiting: {self.plane.sizes()}")
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except TimeoutError:
                    pass

    async def shutdown(self) -> None:
        """Stops the loops and every instance and the shared browser."""
        self._closing = True
        for t in self._loops:
            t.cancel()
        insts = [self.plane.forget(iid) for iid in list(self.plane.instances)]
        await asyncio.gather(*(self._kill(inst, graceful=True) for inst in insts if inst))
        for groups in self._groups.values():
            for g in groups:
                _kill_actor(g.handle)
        self._groups, self._group_of = {}, {}
        nodes, self._nodes = list(self._nodes.values()), {}

        async def stop(node: Any) -> None:
            try:
                await asyncio.wait_for(node.stop.remote(), 10)
            except Exception:
                pass
            ray.kill(node)

        await asyncio.gather(*(stop(n) for n in nodes))

    # -- pools ----------------------------------------------------------------------------------------------
    async def _provision_loop(self) -> None:
        while not self._closing:
            for name, n in self.plane.provision_plan().items():
                for _ in range(n):
                    inst = self.plane.new_instance(name)
                    task = asyncio.ensure_future(self._create(inst))
                    self._creating.add(task)  # keep a reference: the loop only holds tasks weakly
                    task.add_done_callback(self._creating.discard)
            async with self._changed:
                try:
                    await asyncio.wait_for(self._changed.wait(), 0.5)
                except TimeoutError:
                    pass

    def _join_group(self, inst: Instance, pool: PoolConfig) -> Any:
        """A place for ``inst`` in one of the pool's EnvGroups with room (a new group when none has)."""
        groups = self._groups.setdefault(inst.pool, [])
        group = next(
            (g for g in groups if not (g.dead or g.retired) and len(g.members) < pool.instances_per_actor),
            None,
        )
        if group is None:
            opts = dict(self._actor_options.get(inst.pool, _default_actor_options(pool)))
            # each member serves what one env actor would (observe during a step, health checks)
            opts["max_concurrency"] = opts.get("max_concurrency", 8) * pool.instances_per_actor
            group = _Group(remote_class(EnvGroup).options(**opts).remote())
            groups.append(group)
        group.members.add(inst.id)
        group.started += 1
        group.retired = group.started >= RETIRE_AFTER * pool.instances_per_actor
        self._group_of[inst.id] = group
        return group.handle

    async def _leave_group(self, inst: Instance) -> None:
        """Closes ``inst`` inside its group; kills the group once it is dead, or retired and empty."""
        group = self._group_of.pop(inst.id, None)
        if group is None:
            return
        group.members.discard(inst.id)
        try:
            await asyncio.wait_for(group.handle.drop.remote(inst.id), 5)
        except Exception:  # dead or hung: its other members fail on their next call and are replaced
            group.dead = True
        if group.dead or (group.retired and not group.members):
            _kill_actor(group.handle)
            groups = self._groups.get(inst.pool, [])
            if group in groups:
                groups.remove(group)

    async def _create(self, inst: Instance) -> None:
        pool = self.cfg.pools[inst.pool]
        if pool.instances_per_actor > 1:
            process = self._join_group(inst, pool)
            handle: Any = GroupMember(process, inst.id)
        else:
            process = handle = (
                remote_class(EnvActor)
                .options(**self._actor_options.get(inst.pool, _default_actor_options(pool)))
                .remote()
            )
        inst.handle = handle
        t0 = time.perf_counter()

        async def start() -> dict[str, Any]:
            # The actor lands where its host resource allows; its node's services are known only then.
            inst.node_id = await process.node_id.remote()
            services = self._services_on(inst.node_id)
            return await handle.start.remote(inst.id, pool, self.cfg.apps, self.cfg.app_bind, services)

        try:
            info = await asyncio.wait_for(
                start(),
                self.cfg.start_timeout_s,
            )
            if self.plane.started(inst.id, info["pid"]):
                self._hist("start").observe(time.perf_counter() - t0)
            else:  # forgotten while it started (shutdown)
                await self._kill(inst)
        except Exception as exc:  # any start failure: drop it; the loop retries with a fresh actor
            self.plane.start_failed(inst.id, type(exc).__name__)
            await self._kill(inst)
            await asyncio.sleep(min(5.0, 0.5 * self._counters["start_failures"]))
        await self._notify()

    async def _kill(self, inst: Instance, graceful: bool = False) -> None:
        if isinstance(inst.handle, GroupMember):  # close it in its group; the process serves the others
            await self._leave_group(inst)
            self._reclaim(inst)
            return
        if graceful and inst.handle is not None:
            try:
                await asyncio.wait_for(inst.handle.close.remote(), 5)
            except Exception:
                pass
        if inst.handle is not None:
            _kill_actor(inst.handle)
        self._reclaim(inst)

    def _reclaim(self, inst: Instance) -> None:
        """Has the services of the instance's node close what it held there (its app namespace, its page in the
        shared browser). A graceful close did it already; an actor killed by a signal, a crash or a timeout
        never does, and each leftover namespace holds a server, its sockets and ~0.5 MB of app state.
        Fire-and-forget: a dead services actor took them with it."""
        node = self._nodes.get(inst.node_id)
        if node is not None:
            node.release.remote(inst.id)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _health_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.cfg.health_interval_s)
            await self._check_node_services()
            idle = self.plane.health_batch(self.cfg.health_batch)
            results = await asyncio.gather(*(self._healthy(i) for i in idle))
            for inst, ok in zip(idle, results, strict=True):
                gone = self.plane.health_result(inst.id, ok)
                if gone is not None:
                    await self._kill(gone)
                    await self._notify()

    async def _healthy(self, inst: Instance) -> bool:
        try:
            return bool(await asyncio.wait_for(inst.handle.health.remote(), 5))
        except Exception:
            return False

    async def _replace(self, inst: Instance, why: str) -> None:
        """Takes a failed instance out of service and kills its actor; the provisioning loop replaces it."""
        if self.plane.replace(inst.id, why) is not None:
            await self._kill(inst)
            await self._notify()

    # -- leases ---------------------------------------------------------------------------------------------
    async def request(self, n: int = 1, platform: str = "web", timeout_s: float | None = None) -> list[str]:
        """Leases ``n`` instances of ``platform``; waits in order (provisioning on demand) up to the timeout."""
        name = self.plane.pool_for(platform)
        t0 = time.perf_counter()
        w = self.plane.request(name, n)
        if not w.done:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            w.on_done = lambda _: done.done() or done.set_result(None)
            await self._notify()  # the provisioning loop starts instances for the queued demand
            try:
                await asyncio.wait_for(done, timeout_s or self.cfg.request_timeout_s)
            except TimeoutError:
                if not w.done:
                    granted = len(w.leases)
                    self.plane.cancel(w)
                    await self._notify()
                    raise EnvUnavailableError(
                        f"only {granted} of {n} {platform} instances free after waiting; "
                        f"pool: {self.plane.sizes()[name]}"
                    ) from None
            except BaseException:
                self.plane.cancel(w)
                for lease in list(w.leases) if w.done else []:
                    await self.release(lease)
                raise
        self._hist("request").observe(time.perf_counter() - t0)
        return list(w.leases)

    async def release(self, lease: str) -> None:
        """Returns an instance; recycles it after ``recycle_after`` episodes; forgets a broken one."""
        outcome, inst = self.plane.release(lease)
        if inst is None:
            return
        if outcome == "recycle":
            await self._kill(inst, graceful=True)
        elif outcome == "drop":
            await self._kill(inst)
        await self._notify()

    async def report_failure(self, lease: str, reason: str) -> None:
        """A caller on the direct path saw the leased instance fail: take it out of service and replace it."""
        inst = self.plane.report_failure(lease, reason)
        if inst is not None:
            await self._kill(inst)
            await self._notify()

    async def actor(self, lease: str) -> Any:
        """The leased instance's EnvActor handle, for callers that talk to it directly."""
        return self.plane.lookup(lease).handle

    # -- the five operations --------------------------------------------------------------------------------
    def _hist(self, op: str) -> LatencyHistogram:
        if op not in self._hists:
            self._hists[op] = LatencyHistogram()
        return self._hists[op]

    async def _call(self, lease: str, op: str, timeout_s: float, *args: Any) -> Any:
        inst = self.plane.lookup(lease)
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
        self.plane.begin_episode(lease)
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
            "pools": self.plane.sizes(),
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
                "node_id": i.node_id,
            }
            for i in self.plane.instances.values()
        ]

    async def service_pids(self, node_id: str = "") -> dict[str, int]:
        """Pids of one node's shared services process and of its Chromium (0 when not shared): node
        ``node_id``'s, or by default the first node's (a one-node run has one set); {} before any started."""
        node = self._nodes.get(node_id or next(iter(self._nodes), ""))
        return await node.pids.remote() if node is not None else {}

    async def service_held(self) -> dict[str, int]:
        """How many app namespaces and shared-browser pages the nodes' services hold, summed over nodes (one
        each per live web instance; more is a leak)."""
        held: dict[str, int] = {}
        for counts in await asyncio.gather(*(n.held.remote() for n in self._nodes.values())):
            for k, v in counts.items():
                held[k] = held.get(k, 0) + v
        return held

    async def node_services(self) -> dict[str, Any]:
        """The NodeServices actor of every node that hosts env actors, by Ray node id."""
        return dict(self._nodes)
