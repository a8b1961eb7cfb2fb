"""The harness's settings: what an observation turn shows, the history strategy, the action space and the chat
markup. Plain dataclasses that import only the foundation (errors, the action grammar), so the run's config
(:mod:`maigym_ray.config`) composes them without importing the harness's logic, as it composes
:mod:`maigym_ray.envs.config`. The modules that use a setting re-export it from its old path
(``harness.prompt.PromptConfig``, ``harness.history.HistoryConfig``, ...).
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

from maigym_ray.actions import ACTIONS
from maigym_ray.errors import ConfigError

#: The fields a system template may use (harness/prompt.py fills them).
SYSTEM_FIELDS = frozenset({"platform", "actions", "task"})


@dataclass
class PromptConfig:
    """What an observation turn shows the model."""

    #: "a11y" (accessibility text), "screenshot" (the image only) or "both".
    observation: str = "a11y"
    #: the accessibility text is cut to this many characters (the model's context is finite).
    max_a11y_chars: int = 3000
    #: restate the task at the end of every observation turn. Small models attend mostly to recent tokens,
    #: and with a long history the system prompt (which holds the task) drifts far back.
    repeat_task: bool = False
    #: the actions the system turn documents, e.g. [click, terminate] (empty: every action of the platform).
    #: Every web action's doc line is about 420 of a first step's 444 tokens; a tiny model trained on a pool that
    #: needs two of them learns faster from a turn that lists those two. The parser still accepts every action.
    actions: list[str] = field(default_factory=list)
    #: the system turn's text, a template with the fields {platform}, {actions} (one doc line per documented
    #: action) and {task}; empty: the built-in turn (``prompt.DEFAULT_SYSTEM``). A short turn makes every prompt
    #: shorter, so a small model's updates are cheaper and its reply attends to the task sooner.
    system: str = ""

    def __post_init__(self) -> None:
        if self.observation not in ("a11y", "screenshot", "both"):
            raise ConfigError(f"observation={self.observation!r}: choose a11y, screenshot or both")
        if self.system:
            fields = {f for _, f, _, _ in string.Formatter().parse(self.system) if f is not None}
            if fields - SYSTEM_FIELDS:
                raise ConfigError(
                    f"prompt.system: unknown fields {sorted(fields - SYSTEM_FIELDS)}; "
                    f"use {', '.join('{' + f + '}' for f in sorted(SYSTEM_FIELDS))}"
                )
            if "task" not in fields and not self.repeat_task:
                raise ConfigError(
                    "prompt.system has no {task} and prompt.repeat_task is off: the model never sees the task"
                )
        unknown = [a for a in self.actions if a not in ACTIONS]
        if unknown:
            raise ConfigError(f"prompt.actions: {unknown} are not actions; choose from {', '.join(ACTIONS)}")


@dataclass
class HistoryConfig:
    """Which history strategy and its sizes (harness/history.py)."""

    #: "window" (window-wise, K/O) or "step" (step-wise last k).
    strategy: str = "window"
    #: K: steps per window.
    window_steps: int = 10
    #: O: steps of overlap between consecutive windows (0 <= O < K).
    window_overlap: int = 2
    #: k: previous steps a step-wise prompt carries.
    last_k: int = 5

    def __post_init__(self) -> None:
        if self.strategy not in ("window", "step"):
            raise ConfigError(f"history strategy {self.strategy!r}: choose window or step")
        if not 0 <= self.window_overlap < self.window_steps:
            raise ConfigError("need 0 <= window_overlap < window_steps")
        if self.last_k < 0:
            raise ConfigError("last_k must be >= 0")


@dataclass
class ActionSpaceConfig:
    """What the model may sample (model policies whose engine honours ``SamplingConfig.regex``: vLLM;
    harness/action_space.py builds the constraint)."""

    #: sample only the documented action forms, with every ``id`` one of the current screen's element ids.
    #: Off: free text, parsed afterwards. A model that writes a thought before its action needs it off.
    visible_ids: bool = False


@dataclass
class ChatConfig:
    """The model's chat markup: the model's own (read off its chat template) or a named format, with any of
    its parts replaced. ``prompt.build_chat_format`` turns it into a ``ChatFormat``, checking the format's name
    against the chat-format registry then (a package may register formats after the config is built)."""

    #: "auto" (the model's own chat template, harness/chat_template.py) or a registered format
    #: (``prompt.CHAT_FORMATS``): chatml, llama3, gemma, mistral, or one a package adds.
    format: str = "auto"
    #: replacements for the format's parts ("" keeps the format's): the system and user turns (each must
    #: contain "{text}"), the assistant-turn opener, and the image placeholder.
    system: str = ""
    user: str = ""
    assistant_open: str = ""
    image: str = ""
