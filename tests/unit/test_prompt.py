"""The prompt builder: action docs per platform, observation turns, and exact segment tokenisation."""

from __future__ import annotations

import pytest

from maigym_ray.actions import parse_action
from maigym_ray.errors import ActionParseError, ConfigError
from maigym_ray.harness.model_policy import action_text
from maigym_ray.harness.prompt import ACTION_DOCS, COMPACT_SYSTEM, PromptBuilder, PromptConfig
from maigym_ray.types import Action, Observation, TaskSpec

pytestmark = pytest.mark.unit

TASK = TaskSpec(id="t", instruction="Archive Carol's email.", apps=("mail",))


def char_encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def obs(a11y: str = '[msg-m1] link "Invoice"', error: str = "", png: bytes = b"\x89PNG") -> Observation:
    return Observation("web", png, 1024, 768, a11y, last_action_error=error)


def test_system_prompt_lists_only_the_platforms_actions_and_the_task():
    b = PromptBuilder(char_encode)
    web, mobile = b.system_text(TASK, "web"), b.system_text(TASK, "mobile_web")
    assert "swipe(" not in web and "hotkey(" in web
    assert "swipe(" in mobile and "hotkey(" not in mobile
    assert "Task: Archive Carol's email." in web
    header = b.header(TASK, "web")  # what ModelPolicy keeps: the text and the ids of exactly that text
    assert header.text.startswith("<|im_start|>system\n") and header.text == b.header_text(TASK, "web")
    assert header.ids == char_encode(header.text)
    assert len(ACTION_DOCS) == 14


def test_observation_turn_carries_error_text_and_image_placeholder():
    b = PromptBuilder(char_encode, PromptConfig(observation="both", max_a11y_chars=10))
    text = b.observation_text(obs(a11y="x" * 50, error="no visible element"), step=2)
    assert text.startswith("<|im_start|>user\nStep 3.\nYour last action failed: no visible element\n")
    assert "x" * 10 + "\n..." in text and "x" * 11 not in text
    assert "<image>" in text and text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert b.images(obs()) == [b"\x89PNG"]
    a11y_only = PromptBuilder(char_encode)
    assert "<image>" not in a11y_only.observation_text(obs(), 0) and a11y_only.images(obs()) == []
    turn = b.observation(obs(), 0)
    assert turn.text == b.observation_text(obs(), 0) and turn.ids == char_encode(turn.text)


def test_bad_prompt_config():
    with pytest.raises(ConfigError):
        PromptConfig(observation="video")
    with pytest.raises(ConfigError, match=r"tap.* are not actions"):
        PromptConfig(actions=["click", "tap"])
    # ConfigError is a ValueError too, so callers that caught ValueError before still do
    with pytest.raises(ValueError):
        PromptConfig(observation="video")


def test_prompt_lists_only_the_configured_actions():
    full = PromptBuilder(char_encode).system_text(TASK, "web")
    short = PromptBuilder(char_encode, PromptConfig(actions=["click", "terminate"])).system_text(TASK, "web")
    assert "click(" in short and "terminate(" in short and "type(" not in short and "scroll(" not in short
    assert len(short) < len(full) / 2 and short.endswith("Task: Archive Carol's email.")
    # an action the platform does not have stays off the list
    mobile = PromptBuilder(char_encode, PromptConfig(actions=["hotkey", "terminate"])).system_text(
        TASK, "mobile_web"
    )
    assert "hotkey(" not in mobile and "terminate(" in mobile


def test_system_template_replaces_the_built_in_turn():
    cfg = PromptConfig(actions=["click", "terminate"], system=COMPACT_SYSTEM)
    compact = PromptBuilder(char_encode, cfg).system_text(TASK, "mobile_web")
    full = PromptBuilder(char_encode, PromptConfig(actions=["click", "terminate"])).system_text(
        TASK, "mobile_web"
    )
    assert (
        compact.endswith("Task: Archive Carol's email.")
        and "- click(" in compact
        and "- terminate(" in compact
    )
    assert "type(" not in compact and len(compact) < 0.7 * len(full)
    custom = PromptConfig(system="On a {platform}: {task}")
    assert (
        PromptBuilder(char_encode, custom).system_text(TASK, "mobile_web")
        == "On a mobile web: Archive Carol's email."
    )
    # the built-in turn is the default template
    assert PromptBuilder(char_encode).system_text(TASK, "web").startswith("You operate a web device")


def test_bad_system_template():
    with pytest.raises(ConfigError, match=r"unknown fields \['goal'\]"):
        PromptConfig(system="Do {goal}")
    with pytest.raises(ConfigError, match="never sees the task"):
        PromptConfig(system="Reply with one action: {actions}")
    # with the task restated in every observation turn, the system turn may leave it out
    assert PromptConfig(system="Reply with one action: {actions}", repeat_task=True).system


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ('click(id="msg-m1")', Action("click", {"id": "msg-m1"})),
        ('I should open it.\nAction: click(id="msg-m1")\n', Action("click", {"id": "msg-m1"})),
        (
            'Action: answer(text="Aurora")<|im_end|>'.replace("<|im_end|>", ""),
            Action("answer", {"text": "Aurora"}),
        ),
    ],
)
def test_action_text_then_the_env_parser(reply, action):
    # what runs: ModelPolicy cuts the action out of the reply, the env parses it strictly
    assert parse_action(action_text(reply)) == action


@pytest.mark.parametrize(
    "reply", ["", "Action:", "I think we are done", "Action: rm -rf /", 'Action: click(id="a") extra']
)
def test_action_text_then_the_env_parser_rejects(reply):
    with pytest.raises(ActionParseError):
        parse_action(action_text(reply))
