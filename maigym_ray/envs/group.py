"""EnvGroup: several environment instances in one Ray actor process, for pools whose instances are light.

A Ray worker process costs about 50 MB of private memory (PSS) before it holds anything. An instance whose
device lives elsewhere (a page in the node's shared Chromium) costs a few MB more inside its actor, so at one
actor per instance the actor is most of the instance's memory. A pool with ``instances_per_actor`` > 1 packs
that many instances into one :class:`EnvGroup`: each is an :class:`~maigym_ray.envs.actor.EnvActor` object of
its own (own backend, own episode), driven through a :class:`GroupMember` handle that has the actor handle's
shape (``member.step.remote(action)``), so the EnvManager, leases and the direct step path are unchanged.

What is shared is the process: its death fails every instance in it (each is replaced on its next use or
health check), and one instance's CPU-bound work delays the others'. A failed instance alone is closed and
replaced; the group takes new instances until it has started ``RETIRE_AFTER`` times its size, then retires and
exits with its last instance, so the process itself is renewed over time.
"""

from __future__ import annotations

import inspect
import os
import uuid
from typing import Any

from maigym_ray.envs.actor import EnvActor, _skip_arrow_in_ray_worker
from maigym_ray.errors import BackendError

#: The EnvActor operations a member forwards (the manager's and a lease's calls; nothing private).
MEMBER_OPS = frozenset(
    {"start", "reset", "observe", "step", "evaluate", "state", "health", "close", "services_node_id"}
)
#: A group takes new instances until it has started this many times its size (then retires: see above).
RETIRE_AFTER = 4


class EnvGroup:
    """Hosts EnvActor objects by instance id, in one Ray actor process."""

    def __init__(self) -> None:
        _skip_arrow_in_ray_worker()  # as EnvActor: no Arrow/pydantic imports in a process that never sends them
        self.members: dict[str, EnvActor] = {}
        self.group_id = uuid.uuid4().hex  # what members' backends share by (a browser context: share_context)

    def node_id(self) -> str:
        """The Ray node this process runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    async def call(self, instance_id: str, op: str, *args: Any) -> Any:
        """Runs ``op`` of instance ``instance_id`` (``start`` creates it)."""
        if op not in MEMBER_OPS:
            raise BackendError(f"an env group forwards {sorted(MEMBER_OPS)}, not {op!r}")
        member = self.members.get(instance_id)
        if member is None:
            if op != "start":
                raise BackendError(
                    f"instance {instance_id} is not in this env group (closed or never started)"
                )
            member = self.members[instance_id] = EnvActor()
        try:
            out = member.start(*args, group=self.group_id) if op == "start" else getattr(member, op)(*args)
            return await out if inspect.isawaitable(out) else out
        except BaseException:
            if op == "start":  # a member that never started holds nothing worth keeping
                self.members.pop(instance_id, None)
            raise

    async def drop(self, instance_id: str) -> int:
        """Closes instance ``instance_id`` (its backend, its page) and forgets it; returns how many remain."""
        member = self.members.pop(instance_id, None)
        if member is not None:
            try:
                await member.close()
            except Exception:  # a failed instance is being discarded: nothing of it is worth an error here
                pass
        return len(self.members)

    def pid(self) -> int:
        """This process's pid (shared by every member)."""
        return os.getpid()


class _MemberOp:
    def __init__(self, group: Any, instance_id: str, op: str) -> None:
        self.group, self.instance_id, self.op = group, instance_id, op

    def remote(self, *args: Any) -> Any:
        return self.group.call.remote(self.instance_id, self.op, *args)


class GroupMember:
    """One instance of an :class:`EnvGroup`, shaped like its own actor handle: ``member.<op>.remote(*args)``.
    Picklable (the group's actor handle and the instance id), so a lease's caller can hold it."""

    def __init__(self, group: Any, instance_id: str) -> None:
        self.group = group
        self.instance_id = instance_id

    def __getattr__(self, op: str) -> _MemberOp:
        if op not in MEMBER_OPS:
            raise AttributeError(op)
        return _MemberOp(self.group, self.instance_id, op)

    def __reduce__(self) -> tuple[Any, tuple[Any, str]]:
        return (GroupMember, (self.group, self.instance_id))
