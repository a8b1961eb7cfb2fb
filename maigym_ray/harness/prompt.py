"""The prompt builder: the system prompt with the action docs and the task, and one turn per observation.

Everything is rendered to text and then tokenised one segment at a time: the header once per episode, each
observation turn once, when it is first seen. ``history.prompt_ids`` only concatenates these segments with
the response ids the engine sampled, so no token is ever re-tokenised. The chat markup is ChatML, the format
of the tiny default models; a real model's own chat format can be given as a ``ChatFormat``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from maigym_ray.actions import ACTIONS, PLATFORM_ACTIONS
from maigym_ray.errors import ConfigError
from maigym_ray.harness.chat_template import from_template
from maigym_ray.harness.config import ChatConfig, PromptConfig
from maigym_ray.plugins import Registry
from maigym_ray.types import Observation, TaskSpec

ACTION_DOCS: dict[str, str] = {
    "click": 'click(id="ID") or click(x=X, y=Y): click or tap an element or a point',
    "long_press": 'long_press(id="ID", duration_ms=800): press and hold',
    "type": 'type(id="ID", text="...", enter=false): set a text field (without id: type at the caret)',
    "scroll": 'scroll(direction="down", id="ID", amount=300): scroll the page or an element',
    "swipe": "swipe(from_x=X, from_y=Y, to_x=X, to_y=Y): swipe with one finger",
    "drag": 'drag(from_id="ID", to_id="ID") or drag(from_x=X, from_y=Y, to_x=X, to_y=Y)',
    "key": 'key(key="Enter"): press a key',
    "hotkey": 'hotkey(keys=["Control", "a"]): press keys together',
    "open_app": 'open_app(name="mail"): open an app',
    "navigate_back": "navigate_back(): go back one screen",
    "navigate_home": "navigate_home(): go to the home screen with all apps",
    "wait": "wait(seconds=1): wait for the screen to change",
    "answer": 'answer(text="..."): give the answer the task asks for',
    "terminate": 'terminate(status="success"): end the task ("success" or "failure")',
}
assert set(ACTION_DOCS) == set(ACTIONS), "every action of the grammar needs a doc line"

#: The built-in system turn (``PromptConfig.system`` replaces it).
DEFAULT_SYSTEM = (
    "You operate a {platform} device to complete a task.\n"
    'Each turn shows the screen. Elements are listed as [id] role "name"; coordinates run 0-1000.\n'
    "Reply with exactly one action, one of:\n{actions}\n"
    "Task: {task}"
)
#: A short system turn (about a third of the built-in one's tokens with two actions documented).
COMPACT_SYSTEM = 'Elements are listed as [id] role "name".\nReply with one action:\n{actions}\nTask: {task}'


class Segment(NamedTuple):
    """One rendered part of a prompt: its text and the token ids of exactly that text (never re-tokenised)."""

    text: str
    ids: list[int]


@dataclass(frozen=True)
class ChatFormat:
    """Chat markup around system, user and assistant turns (ChatML by default)."""

    system: str = "<|im_start|>system\n{text}<|im_end|>\n"
    user: str = "<|im_start|>user\n{text}<|im_end|>\n"
    assistant_open: str = "<|im_start|>assistant\n"
    image: str = "<image>"


def _accept(name: str, obj: object) -> ChatFormat:
    if not isinstance(obj, ChatFormat):
        raise ConfigError(f"chat format {name!r} is a {type(obj).__name__}, not a ChatFormat")
    return obj


#: Chat formats by name (entry-point group ``maigym_ray.chat_formats``): chatml, llama3, gemma and mistral
#: (harness/chat_formats.py), and any a package adds.
CHAT_FORMATS: Registry[ChatFormat] = Registry("chat_formats", "chat format", _accept)


def build_chat_format(cfg: ChatConfig, template: str | None = None) -> ChatFormat:
    """The ChatFormat ``cfg`` names, with ``format: auto`` the one of the model's chat ``template``; ConfigError
    on an unknown format, a template that does not split into turns, or a turn without {text}."""
    if cfg.format == "auto":
        if template is None:
            raise ConfigError("chat.format=auto needs the model's chat template")
        system, user, opener = from_template(template)
        base = ChatFormat(system=system, user=user, assistant_open=opener)
    elif cfg.format in CHAT_FORMATS:
        base = CHAT_FORMATS.load(cfg.format)
    else:
        raise ConfigError(f"chat.format={cfg.format!r}: choose auto or one of {', '.join(CHAT_FORMATS)}")
    fmt = ChatFormat(
        system=cfg.system or base.system,
        user=cfg.user or base.user,
        assistant_open=cfg.assistant_open or base.assistant_open,
        image=cfg.image or base.image,
    )
    for part in ("system", "user"):
        if "{text}" not in getattr(fmt, part):
            raise ConfigError(f"chat.{part} must contain {{text}} (where the turn's text goes)")
    return fmt


class PromptBuilder:
    """Renders and tokenises the episode header and observation turns. ``encode`` maps text to token ids
    without adding special tokens (e.g. ``lambda s: tok.encode(s, add_special_tokens=False)``)."""

    def __init__(
        self,
        encode: Callable[[str], list[int]],
        cfg: PromptConfig | None = None,
        chat: ChatFormat | None = None,
    ) -> None:
        self.encode = encode
        self.cfg = cfg or PromptConfig()
        self.chat = chat or ChatFormat()

    def allowed_actions(self, platform: str) -> frozenset[str]:
        """The actions the system turn documents: the platform's, narrowed to ``cfg.actions`` when given."""
        allowed = PLATFORM_ACTIONS.get(platform, frozenset(ACTIONS))
        return allowed & set(self.cfg.actions) if self.cfg.actions else allowed

    def shown_a11y(self, obs: Observation) -> str:
        """The accessibility text an observation turn shows ("" when the turn shows only the screenshot)."""
        if self.cfg.observation not in ("a11y", "both"):
            return ""
        if len(obs.a11y) <= self.cfg.max_a11y_chars:
            return obs.a11y
        return obs.a11y[: self.cfg.max_a11y_chars] + "\n..."

    def system_text(self, task: TaskSpec, platform: str) -> str:
        """The system prompt (``cfg.system``, or ``DEFAULT_SYSTEM``): role, the platform's actions, the output
        format and the task."""
        allowed = self.allowed_actions(platform)
        docs = "\n".join(f"- {ACTION_DOCS[name]}" for name in ACTIONS if name in allowed)
        return (self.cfg.system or DEFAULT_SYSTEM).format(
            platform=platform.replace("_", " "), actions=docs, task=task.instruction
        )

    def header_text(self, task: TaskSpec, platform: str) -> str:
        """The episode header (the system turn) with its chat markup."""
        return self.chat.system.format(text=self.system_text(task, platform))

    def header(self, task: TaskSpec, platform: str) -> Segment:
        """The episode header (the system turn): its text and that text's token ids, what a model policy keeps
        for the whole episode."""
        text = self.header_text(task, platform)
        return Segment(text, self.encode(text))

    def observation_text(self, obs: Observation, step: int, task: TaskSpec | None = None) -> str:
        """The user turn of one observation, followed by the assistant-turn opener."""
        lines = [f"Step {step + 1}."]
        if obs.last_action_error:
            lines.append(f"Your last action failed: {obs.last_action_error}")
        if self.cfg.observation in ("a11y", "both"):
            lines.append(self.shown_a11y(obs))
        if self.cfg.observation in ("screenshot", "both"):
            lines.append(self.chat.image)
        if self.cfg.repeat_task and task is not None:
            lines.append(f"Task: {task.instruction}")
        return self.chat.user.format(text="\n".join(lines)) + self.chat.assistant_open

    def observation(self, obs: Observation, step: int, task: TaskSpec | None = None) -> Segment:
        """One observation turn: its text and that text's token ids."""
        text = self.observation_text(obs, step, task)
        return Segment(text, self.encode(text))

    def images(self, obs: Observation) -> list[bytes]:
        """The images one observation turn carries (its screenshot, when the config shows screenshots)."""
        return [obs.screenshot] if self.cfg.observation in ("screenshot", "both") and obs.screenshot else []
