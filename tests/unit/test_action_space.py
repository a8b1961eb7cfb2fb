"""The visible-element action space: the regex the engine samples under (harness/action_space.py)."""

from __future__ import annotations

import re

import pytest

from maigym_ray.actions import ACTIONS, parse_action
from maigym_ray.harness.action_space import action_regex, visible_ids
from maigym_ray.harness.prompt import PromptBuilder, PromptConfig
from maigym_ray.types import Observation

pytestmark = pytest.mark.unit

A11Y = 'heading "Mail"\n[home] link "Home"\n[msg-m13] link "Invoice"\n  [a.b] button "Star" (offscreen)\n[home] x'


def test_visible_ids_are_the_a11y_lines_ids_in_order_once() -> None:
    assert visible_ids(A11Y) == ["home", "msg-m13", "a.b"]
    assert visible_ids('text "no ids [here]"') == []


def test_the_regex_admits_clicks_on_the_screen_only() -> None:
    r = action_regex(["click", "terminate"], visible_ids(A11Y))
    for ok in ['click(id="msg-m13")', 'click(id="a.b")', 'terminate(status="success")']:
        assert re.fullmatch(r, ok), ok
    for bad in [
        'click(id="msg-m3")',  # recalled from another instance: not on this screen
        'click(id="aXb")',  # "." is literal
        "click(x=10, y=20)",  # a point, while the screen lists elements
        'type(id="home", text="x")',  # an action the system turn does not list
        'click(id="home") ',
        'terminate(status="done")',
    ]:
        assert not re.fullmatch(r, bad), bad


def test_every_documented_form_matches_and_parses() -> None:
    r = action_regex(ACTIONS, ["home", "q"])
    for text in [
        'type(id="q", text="hello", enter=true)',
        'type(text="hi")',
        'scroll(direction="down", id="q", amount=300)',
        'drag(from_id="home", to_id="q")',
        "swipe(from_x=1, from_y=2, to_x=1000, to_y=0)",
        'key(key="Enter")',
        'hotkey(keys=["Control", "a"])',
        'open_app(name="mail")',
        "navigate_back()",
        "navigate_home()",
        "wait(seconds=1)",
        'answer(text="42")',
        'long_press(id="home", duration_ms=800)',
    ]:
        assert re.fullmatch(r, text), text
        parse_action(text)


def test_without_ids_targets_are_points() -> None:
    r = action_regex(["click", "terminate"], [])
    assert re.fullmatch(r, "click(x=500, y=1000)") and not re.fullmatch(r, "click(x=1001, y=0)")
    assert not re.fullmatch(r, 'click(id="home")')
    with pytest.raises(ValueError, match="not actions"):
        action_regex(["click", "run_shell"], [])


def test_ids_come_from_the_text_the_turn_shows() -> None:
    """An id cut off by max_a11y_chars is not on the model's screen, so it is not in the action space."""
    builder = PromptBuilder(lambda s: [0], PromptConfig(max_a11y_chars=40))
    obs = Observation(platform="web", screenshot=b"", width=1, height=1, a11y=A11Y)
    assert visible_ids(builder.shown_a11y(obs)) == ["home"]
    assert builder.shown_a11y(Observation(platform="web", screenshot=b"", width=1, height=1, a11y="")) == ""
    shots = PromptBuilder(lambda s: [0], PromptConfig(observation="screenshot"))
    assert shots.shown_a11y(obs) == ""
