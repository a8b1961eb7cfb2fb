"""The desktop backend through a real local Ray EnvManager: real Xvfb, openbox, xdotool and headful Chromium.

Golden solutions use the mocked apps in the desktop's Chromium and a terminal that writes files; the verifier
reads the apps' state and the home directory's files. Reset must restore both exactly, and a desktop whose X
server dies is replaced.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import time

import psutil
import pytest

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.errors import InfraError
from maigym_ray.tasks.pool import TaskPool

pytestmark = pytest.mark.integration

_MISSING = [t for t in ("Xvfb", "openbox", "xdotool", "xterm") if shutil.which(t) is None]
if _MISSING:
    print(f"skipping desktop tests: {', '.join(_MISSING)} not installed (scripts/setup.sh installs them)")
    pytest.skip(f"{', '.join(_MISSING)} not installed", allow_module_level=True)

# per leased desktop, the tasks it runs one after the other (mocked apps + terminal, editor, seeded files)
TASKS = [["desktop-contacts-tom-phone-file", "desktop-file-to-calendar"], ["desktop-editor-design-review"]]


@pytest.fixture(scope="module")
def manager(ray_local, tmp_path_factory):
    from maigym_ray.envs.manager import EnvManager

    template = tmp_path_factory.mktemp("home-template")
    (template / "Documents").mkdir()
    (template / "Documents" / "welcome.txt").write_text("Welcome to the desktop.\n")
    cfg = EnvManagerConfig(
        pools={
            "desktop": PoolConfig(
                platform="desktop",
                backend="desktop",
                target_size=2,
                max_size=3,
                recycle_after=0,
                options={"home_template": str(template), "terminal": True},
            )
        },
        health_interval_s=0.5,
        start_timeout_s=120,
        reset_timeout_s=30,
        step_timeout_s=30,
    )
    m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=1000).remote(cfg, TaskPool.builtin())
    ray_local.get(m.start.remote(wait=True), timeout=300)
    yield m
    ray_local.get(m.shutdown.remote(), timeout=60)
    ray_local.kill(m)


async def wait_for(cond, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.2)


async def pool_idle(m, n: int = 2) -> bool:
    return (await m.metrics.remote())["pools"]["desktop"]["idle"] >= n


def xvfb_of(actor_pid: int) -> psutil.Process:
    """The X server an env actor started (a child process of the actor)."""
    procs = [p for p in psutil.Process(actor_pid).children(recursive=True) if p.name() == "Xvfb"]
    assert len(procs) == 1, procs
    return procs[0]


async def test_two_desktops_golden_solutions_and_exact_reset(manager):
    pool = TaskPool.builtin()
    leases = await manager.request.remote(2, "desktop")

    async def run(lease: str, task_ids: list[str]) -> None:
        for task_id in task_ids:
            await run_one(lease, task_id)

    async def run_one(lease: str, task_id: str) -> None:
        task = pool.get(task_id)
        obs = await manager.reset.remote(lease, task_id)
        assert obs.platform == "desktop" and obs.app == task.start_app, (obs.app, obs.url)
        assert obs.screenshot.startswith(b"\x89PNG") and (obs.width, obs.height) == (1280, 800)
        assert 'window "' in obs.a11y and "(browser, focused)" in obs.a11y
        initial = await manager.state.remote(lease)
        home = initial["desktop"]["files"]
        assert {"path": "Documents/welcome.txt", "content": "Welcome to the desktop.\n"} in home
        assert (await manager.evaluate.remote(lease)).value == 0.0
        for g in task.golden:
            res = await manager.step.remote(lease, g)
            assert res.observation.last_action_error == "", (task_id, g, res.observation.last_action_error)
        reward = await manager.evaluate.remote(lease)
        assert reward.value == 1.0 and reward.success, (task_id, reward)
        after = await manager.state.remote(lease)
        assert after != initial
        # a file the episode leaves behind must be gone after the reset, and the template back
        for action in [
            'open_app(name="terminal")',
            'type(text="rm -rf ~/Documents; echo x > ~/stray.txt", enter=true)',
        ]:
            res = await manager.step.remote(lease, action)
            assert res.observation.last_action_error == "", (action, res.observation.last_action_error)
        await manager.step.remote(lease, "wait(seconds=0.5)")
        assert [f["path"] for f in (await manager.state.remote(lease))["desktop"]["files"]] != [
            f["path"] for f in home
        ]
        obs = await manager.reset.remote(lease, task_id)
        assert await manager.state.remote(lease) == initial  # apps and home files exactly as before
        assert (await manager.evaluate.remote(lease)).value == 0.0
        assert "(terminal" not in obs.a11y  # the session apps of the episode are gone

    try:
        await asyncio.gather(*(run(lease, t) for lease, t in zip(leases, TASKS, strict=True)))
        instances = {i["id"] for i in await manager.instances.remote() if i["leased"]}
        assert len(instances) == 2  # two different desktops, never shared
    finally:
        for lease in leases:
            await manager.release.remote(lease)


async def test_element_ids_coordinates_and_mistakes(manager):
    (lease,) = await manager.request.remote(1, "desktop")
    try:
        task = dataclasses.replace(TaskPool.builtin().get("desktop-mail-room-note"), max_steps=40)
        obs = await manager.reset.remote(lease, task)
        el = next(e for e in obs.elements if e.id == "msg-m4")
        assert 0 < el.x < 1280 and 0 < el.y < 800  # screen pixels of the page element
        # a click at the element's normalised coordinates opens the same message as a click by id
        res = await manager.step.remote(lease, f"click(x={el.x * 1000 // 1280}, y={el.y * 1000 // 800})")
        assert res.observation.last_action_error == "" and "Aurora" in res.observation.a11y
        res = await manager.step.remote(lease, "navigate_back()")
        assert res.observation.last_action_error == "" and "msg-m4" in res.observation.a11y
        res = await manager.step.remote(lease, 'click(id="no-such-element")')
        assert "no visible element with id 'no-such-element'" in res.observation.last_action_error
        res = await manager.step.remote(lease, "swipe(from_x=1, from_y=1, to_x=2, to_y=2)")
        assert "not supported on desktop" in res.observation.last_action_error
        res = await manager.step.remote(lease, 'type(text="stray")')
        assert "no text field is focused" in res.observation.last_action_error
        # keyboard: type into a field, select all with a hotkey and delete it with a key
        for action in ['click(id="compose")', 'type(id="to", text="bob@example.com")']:
            assert (await manager.step.remote(lease, action)).observation.last_action_error == ""
        to = next(e for e in (await manager.observe.remote(lease)).elements if e.id == "to")
        assert to.value == "bob@example.com"
        for action in ['hotkey(keys=["Control", "a"])', 'key(key="Backspace")']:
            res = await manager.step.remote(lease, action)
            assert res.observation.last_action_error == ""
        assert next(e for e in res.observation.elements if e.id == "to").value == ""
        res = await manager.step.remote(lease, 'drag(from_id="to", to_id="subject")')
        assert res.observation.last_action_error == ""
        res = await manager.step.remote(lease, 'open_app(name="spreadsheet")')
        assert "no app named 'spreadsheet'" in res.observation.last_action_error
        res = await manager.step.remote(lease, 'open_app(name="editor")')
        assert res.observation.last_action_error == "" and res.observation.app == "editor"
        browser = next(e for e in res.observation.elements if e.role == "window" and "Chromium" in e.name)
        res = await manager.step.remote(lease, f'click(id="{browser.id}")')  # a window's id focuses it
        assert res.observation.app == "mail" and f"[{browser.id}] window" in res.observation.a11y
        res = await manager.step.remote(lease, 'open_app(name="calendar")')
        assert res.observation.app == "calendar" and "new-event" in res.observation.a11y
        res = await manager.step.remote(lease, 'scroll(direction="down")')
        assert res.observation.last_action_error == ""
        assert not res.done and res.info["steps"] == 15
    finally:
        await manager.release.remote(lease)


async def test_dead_x_server_is_replaced(manager):
    await wait_for(lambda: pool_idle(manager))
    # an idle desktop whose X server dies fails its health check and is replaced
    before = {i["id"]: i["pid"] for i in await manager.instances.remote()}
    victim_id, victim_pid = next(iter(before.items()))
    xvfb_of(victim_pid).send_signal(signal.SIGKILL)

    async def replaced() -> bool:
        ids = {i["id"] for i in await manager.instances.remote() if i["state"] == "idle"}
        return victim_id not in ids and await pool_idle(manager)

    await wait_for(replaced)
    # a leased desktop whose X server dies mid-episode fails the step as an infrastructure error
    (lease,) = await manager.request.remote(1, "desktop")
    await manager.reset.remote(lease, "desktop-mail-room-note")
    actor_pid = next(i["pid"] for i in await manager.instances.remote() if i["leased"])
    os.kill(xvfb_of(actor_pid).pid, signal.SIGKILL)
    with pytest.raises(InfraError):
        for _ in range(3):
            await manager.step.remote(lease, 'click(id="msg-m4")')
            await asyncio.sleep(0.3)
    await manager.release.remote(lease)
    await wait_for(lambda: pool_idle(manager))
    counters = (await manager.metrics.remote())["counters"]
    assert counters.get("replaced", 0) >= 2
    (lease,) = await manager.request.remote(1, "desktop")  # a fresh desktop runs a task to success
    try:
        task = TaskPool.builtin().get("desktop-mail-room-note")
        await manager.reset.remote(lease, task.id)
        for g in task.golden:
            assert (await manager.step.remote(lease, g)).observation.last_action_error == ""
        assert (await manager.evaluate.remote(lease)).success
    finally:
        await manager.release.remote(lease)
