"""One contract, every backend this machine can run: start / reset / observe / act / state / health / close.

The fake always runs; web needs Chromium; desktop needs Xvfb, openbox, xdotool and xterm; android needs a
ReDroid host (never here). A backend that cannot run is skipped with the reason.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict

import pytest

from maigym_ray.actions import parse_action
from maigym_ray.config import DesktopBackendConfig, PoolConfig
from maigym_ray.envs.actor import build_backend
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.testing import fake_task
from maigym_ray.types import Observation, TaskSpec

pytestmark = pytest.mark.integration


def _missing(*tools: str) -> list[str]:
    return [t for t in tools if shutil.which(t) is None]


def _fake(tmp_path) -> tuple[PoolConfig, TaskSpec]:
    return PoolConfig(backend="fake"), fake_task()


def _web(tmp_path) -> tuple[PoolConfig, TaskSpec]:
    if _missing("chromium"):
        pytest.skip("web: chromium is not installed")
    task = TaskPool.builtin().get("train-book-earliest")
    return PoolConfig(backend="web", options={"browser": "per_env"}), task


def _desktop(tmp_path) -> tuple[PoolConfig, TaskSpec]:
    missing = _missing("Xvfb", "openbox", "xdotool", "xterm")
    if missing:
        pytest.skip(f"desktop: {', '.join(missing)} not installed")
    (tmp_path / "home" / "Documents").mkdir(parents=True)
    cfg = DesktopBackendConfig(home_template=str(tmp_path / "home"))
    task = TaskPool.builtin().get("desktop-contacts-tom-phone-file")
    return PoolConfig(platform="desktop", backend="desktop", options=asdict(cfg)), task


def _android(tmp_path) -> tuple[PoolConfig, TaskSpec]:
    pytest.skip("android: needs a ReDroid host (binder and an image); none here")


def _check_observation(obs: Observation, platform: str) -> None:
    assert isinstance(obs, Observation) and obs.platform == platform
    assert obs.screenshot.startswith(b"\x89PNG") and obs.width > 0 and obs.height > 0
    assert isinstance(obs.a11y, str)


@pytest.mark.parametrize("make", [_fake, _web, _desktop, _android], ids=["fake", "web", "desktop", "android"])
async def test_backend_contract(make, tmp_path):
    pool, task = make(tmp_path)
    backend = build_backend(pool, list(task.apps))
    assert backend.platform == pool.platform
    try:
        await backend.start()
        await backend.start()  # idempotent
        assert await backend.health() is True
        await backend.reset(task)
        initial = await backend.state()
        _check_observation(await backend.observe(), pool.platform)
        error = await backend.act(parse_action(task.golden[0]))
        assert error == "", error  # the golden first step is a valid action on its initial screen
        error, obs = await backend.act_and_observe(parse_action("click(x=1, y=1)"))
        assert isinstance(error, str)
        _check_observation(obs, pool.platform)
        state = await backend.state()
        json.dumps(state)  # verifiers read JSON
        assert set(task.apps) <= set(state)
        await backend.reset(task)  # a second episode on the same instance starts from the same state
        assert await backend.state() == initial
    finally:
        await backend.close()
    await backend.close()  # idempotent, never raises
    assert await backend.health() is False
