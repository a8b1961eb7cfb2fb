"""The web backend on a real Chromium (in-process page and apps, no Ray): every grammar action for web and mobile."""

from __future__ import annotations

import pytest

from maigym_ray.actions import parse_action
from maigym_ray.config import WebBackendConfig
from maigym_ray.envs.backends.page import LocalPage
from maigym_ray.envs.backends.web import LocalApps, WebBackend
from maigym_ray.errors import TaskError
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.types import TaskSpec

pytestmark = pytest.mark.integration


async def _backend(platform: str) -> WebBackend:
    b = WebBackend(WebBackendConfig(platform=platform, browser="per_env"), LocalApps(["all"]), LocalPage())
    await b.start()
    return b


def _task(app: str, **kw) -> TaskSpec:
    return TaskSpec(
        id=f"t-{app}",
        instruction="x",
        apps=(app,),
        platforms=("web", "mobile_web"),
        start_app=app,
        verifier={"name": "checks", "params": {"checks": []}},
        **kw,
    )


async def act(b: WebBackend, text: str) -> str:
    return await b.act(parse_action(text))


async def scroll_y(b: WebBackend) -> float:
    return await b.page._d()._require().evaluate("window.scrollY")  # type: ignore[attr-defined]


async def make_tall(b: WebBackend) -> None:
    await b.page._d()._require().evaluate("document.body.style.minHeight = '3000px'")  # type: ignore[attr-defined]


@pytest.fixture
async def web():
    b = await _backend("web")
    yield b
    await b.close()


@pytest.fixture
async def mobile():
    b = await _backend("mobile_web")
    yield b
    await b.close()


async def test_observation_has_png_and_accessibility_ids(web):
    await web.reset(_task("mail"))
    obs = await web.observe()
    assert obs.screenshot[:8] == b"\x89PNG\r\n\x1a\n"
    assert (obs.width, obs.height) == (1024, 768)
    assert obs.app == "mail"
    assert '[msg-m1] link "Invoice November"' in obs.a11y
    ids = {e.id for e in obs.elements}
    assert {"compose", "search-box", "msg-m2"} <= ids


async def test_click_type_key_and_navigation(web):
    await web.reset(_task("contacts"))
    assert await act(web, 'type(id="search-box", text="Sara")') == ""
    assert await act(web, 'key(key="Enter")') == ""
    obs = await web.observe()
    assert "Sara Kim" in obs.a11y and "Tom Becker" not in obs.a11y
    assert await act(web, 'click(id="contact-c2")') == ""
    assert "Phone: +49 160 9876543" in (await web.observe()).a11y
    assert await act(web, "navigate_back()") == ""
    assert "/contacts/?q=Sara" in (await web.observe()).url
    assert await act(web, 'open_app(name="calendar")') == ""
    assert (await web.observe()).app == "calendar"
    assert await act(web, "navigate_home()") == ""
    assert "[app-train] link" in (await web.observe()).a11y


async def test_type_with_target_replaces_and_hotkey_selects(web):
    await web.reset(_task("contacts"))
    await act(web, 'click(id="new-contact")')
    await act(web, 'type(id="name", text="first")')
    await act(web, 'type(id="name", text="second")')
    obs = await web.observe()
    assert next(e for e in obs.elements if e.id == "name").value == "second"
    await act(web, 'hotkey(keys=["Control", "a"])')
    await act(web, 'type(text="third")')  # no target: types at the caret, replacing the selection
    assert next(e for e in (await web.observe()).elements if e.id == "name").value == "third"


async def test_coordinates_scroll_drag_and_wait(web):
    await web.reset(_task("mail"))
    obs = await web.observe()
    el = next(e for e in obs.elements if e.id == "msg-m2")
    x, y = round(el.x * 1000 / obs.width), round(el.y * 1000 / obs.height)
    assert await act(web, f"click(x={x}, y={y})") == ""
    assert "Kickoff is on Monday" in (await web.observe()).a11y
    await web.reset(_task("calendar"))
    await make_tall(web)
    assert await act(web, 'scroll(direction="down", amount=200)') == ""
    assert await scroll_y(web) > 0
    assert await act(web, "drag(from_x=100, from_y=100, to_x=300, to_y=300)") == ""
    assert await act(web, "wait(seconds=0.1)") == ""


async def test_agent_mistakes_are_messages_not_exceptions(web):
    await web.reset(_task("mail"))
    assert "no visible element" in await act(web, 'click(id="does-not-exist")')
    assert "no app named" in await act(web, 'open_app(name="casino")')
    assert "no previous screen" in await act(web, "navigate_back()")
    await act(web, 'click(id="msg-m1")')
    assert "no text field is focused" in await act(web, 'type(text="hello")')


async def test_mobile_touch_tap_swipe_and_long_press(mobile):
    await mobile.reset(_task("calendar"))
    obs = await mobile.observe()
    assert (obs.width, obs.height) == (390, 844)
    assert await mobile.page._d()._require().evaluate("'ontouchstart' in window")  # type: ignore[attr-defined]
    await make_tall(mobile)
    assert await act(mobile, "swipe(from_x=500, from_y=800, to_x=500, to_y=200)") == ""
    assert await scroll_y(mobile) > 0
    assert await act(mobile, 'long_press(id="new-event", duration_ms=300)') == ""
    assert await act(mobile, 'click(id="new-event")') == ""
    assert "New event" in (await mobile.observe()).a11y


async def test_reset_restores_initial_state_and_bad_seed_is_task_error(web):
    task = TaskPool.builtin().get("contacts-delete-plumber")
    await web.reset(task)
    initial = await web.state()
    for g in task.golden:
        assert await act(web, g) == ""
    assert await web.state() != initial
    await web.reset(task)
    assert await web.state() == initial
    with pytest.raises(TaskError, match="initial_state"):
        await web.reset(_task("mail", initial_state={"mail": {"bogus": []}}))
