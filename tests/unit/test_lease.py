"""LeasedEnv's control path: the manager's typed errors pass as they are, any other Ray failure is an
infrastructure failure, and a broken lease is reported before it is released."""

from __future__ import annotations

import pytest
from ray.exceptions import GetTimeoutError

from maigym_ray.envs.lease import LeasedEnv
from maigym_ray.errors import EnvUnavailableError, InfraError, TaskError
from maigym_ray.testing.fake_backend import fake_task

pytestmark = pytest.mark.unit


class _Method:
    def __init__(self, manager: _Manager, name: str) -> None:
        self.manager, self.name = manager, name

    async def remote(self, *args):
        self.manager.calls.append((self.name, *args))
        outcome = self.manager.outcomes.get(self.name)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class _Manager:
    """Speaks the EnvManager actor handle's call shape (``handle.op.remote(...)`` awaited)."""

    def __init__(self, **outcomes) -> None:
        self.outcomes = outcomes
        self.calls: list[tuple] = []

    def __getattr__(self, name: str) -> _Method:
        return _Method(self, name)


async def test_a_ray_failure_on_the_control_path_is_an_infrastructure_failure() -> None:
    env = LeasedEnv(_Manager(evaluate=GetTimeoutError("object lost"), state={"notes": []}), "lease-1")
    with pytest.raises(EnvUnavailableError, match="evaluate on lease lease-1: GetTimeoutError") as info:
        await env.evaluate()
    assert isinstance(info.value, InfraError)
    assert await env.state() == {"notes": []}


async def test_the_managers_own_errors_pass_unchanged() -> None:
    env = LeasedEnv(_Manager(reset=TaskError("bad seed")), "lease-1")
    with pytest.raises(TaskError, match="bad seed"):
        await env.reset(fake_task())


async def test_a_broken_lease_is_reported_before_it_is_released() -> None:
    manager = _Manager()
    await LeasedEnv(manager, "lease-1").release(broken=True)
    await LeasedEnv(manager, "lease-2").release()
    assert [c[:2] for c in manager.calls] == [
        ("report_failure", "lease-1"),
        ("release", "lease-1"),
        ("release", "lease-2"),
    ]
