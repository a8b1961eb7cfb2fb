"""The action grammar: one function-call syntax for every platform, parsed strictly and never executed.

Syntax (keyword arguments only)::

    action   := NAME "(" [kwarg ("," kwarg)*] ")"
    kwarg    := NAME "=" value
    value    := STRING | NUMBER | "true" | "false" | "[" [value ("," value)*] "]"

Strings are JSON strings (double quotes, JSON escapes). Coordinates are normalised to 0..1000 on both axes;
``id`` names an element of the accessibility text. The parser is a hand-written tokenizer: no ``eval``, no
``ast``, bounded input length, and every failure is an :class:`ActionParseError` whose message the model reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import ActionParseError, UnsupportedActionError
from maigym_ray.types import Action

MAX_ACTION_CHARS = 2048
COORD_MAX = 1000
#: Caps on the arguments that make one step last: a press-and-hold, a wait, a scroll distance (pixels; the
#: desktop turns it into wheel clicks one by one). Over the cap is a parse error, not a clamp (see
#: docs/decisions.md), so a step can never outlast the step timeout and turn a bad episode into an
#: infrastructure failure that leaves the gradient.
LONG_PRESS_MAX_MS = 5000
WAIT_MAX_S = 10
SCROLL_MAX_PX = 5000

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,8})(?:\.[0-9]{1,6})?")
_JSON_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')


@dataclass(frozen=True)
class ArgSpec:
    """One argument of an action: its accepted type and whether it is required."""

    kind: (
        str  # "str" | "int" | "num" | "bool" | "coord" | "id" | "list[str]" | one of enum values via choices
    )
    required: bool = False
    choices: tuple[str, ...] = ()
    #: the largest value a numeric argument may take; a larger one is a parse error the model reads
    cap: float | None = None


_ID = ArgSpec("id")
_X = ArgSpec("coord")
_Y = ArgSpec("coord")

#: Every action of the grammar with its arguments. Target arguments (``id`` or ``x``/``y``) are checked below.
ACTIONS: dict[str, dict[str, ArgSpec]] = {
    "click": {"id": _ID, "x": _X, "y": _Y},
    "long_press": {"id": _ID, "x": _X, "y": _Y, "duration_ms": ArgSpec("int", cap=LONG_PRESS_MAX_MS)},
    "type": {"text": ArgSpec("str", True), "id": _ID, "x": _X, "y": _Y, "enter": ArgSpec("bool")},
    "scroll": {
        "direction": ArgSpec("str", True, ("up", "down", "left", "right")),
        "id": _ID,
        "x": _X,
        "y": _Y,
        "amount": ArgSpec("int", cap=SCROLL_MAX_PX),
    },
    "swipe": {
        "from_x": ArgSpec("coord", True),
        "from_y": ArgSpec("coord", True),
        "to_x": ArgSpec("coord", True),
        "to_y": ArgSpec("coord", True),
    },
    "drag": {
        "from_id": _ID,
        "to_id": _ID,
        "from_x": _X,
        "from_y": _Y,
        "to_x": _X,
        "to_y": _Y,
    },
    "key": {"key": ArgSpec("str", True)},
    "hotkey": {"keys": ArgSpec("list[str]", True)},
    "open_app": {"name": ArgSpec("str", True)},
    "navigate_back": {},
    "navigate_home": {},
    "wait": {"seconds": ArgSpec("num", cap=WAIT_MAX_S)},
    "answer": {"text": ArgSpec("str", True)},
    "terminate": {"status": ArgSpec("str", False, ("success", "failure"))},
}

#: The subset each platform supports. Pointer desktops have no swipe/long-press; touch screens no hotkeys/drag.
PLATFORM_ACTIONS: dict[str, frozenset[str]] = {
    "web": frozenset(ACTIONS) - {"swipe", "long_press"},
    "mobile_web": frozenset(ACTIONS) - {"drag", "hotkey"},
    "android": frozenset(ACTIONS) - {"hotkey"},
    "desktop": frozenset(ACTIONS) - {"swipe", "long_press"},
}

#: Key names the grammar accepts for ``key``/``hotkey`` (Playwright/xdotool-compatible spelling).
KEYS = frozenset(
    [
        "Enter",
        "Tab",
        "Escape",
        "Backspace",
        "Delete",
        "Space",
        "ArrowUp",
        "ArrowDown",
        "ArrowLeft",
        "ArrowRight",
    ]
    + ["Home", "End", "PageUp", "PageDown", "Control", "Shift", "Alt", "Meta"]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + [str(d) for d in range(10)]
    + [f"F{i}" for i in range(1, 13)]
)


class _Cursor:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            got = self.text[self.pos : self.pos + 12] or "end of input"
            raise ActionParseError(f"expected {ch!r} at position {self.pos}, got {got!r}")
        self.pos += 1

    def match(self, pattern: re.Pattern[str], what: str) -> str:
        self.skip_ws()
        m = pattern.match(self.text, self.pos)
        if not m:
            got = self.text[self.pos : self.pos + 12] or "end of input"
            raise ActionParseError(f"expected {what} at position {self.pos}, got {got!r}")
        self.pos = m.end()
        return m.group(0)


def _value(cur: _Cursor, depth: int = 0) -> Any:
    ch = cur.peek()
    if ch == '"':
        return json.loads(cur.match(_JSON_STRING, "a JSON string"))
    if ch == "[":
        if depth > 0:
            raise ActionParseError("nested lists are not allowed")
        cur.expect("[")
        items: list[Any] = []
        if cur.peek() == "]":
            cur.pos += 1
            return items
        while True:
            items.append(_value(cur, depth + 1))
            if cur.peek() == ",":
                cur.pos += 1
                continue
            cur.expect("]")
            return items
    if ch == "-" or ch.isdigit():
        lit = cur.match(_NUMBER, "a number")
        return float(lit) if "." in lit else int(lit)
    word = cur.match(_NAME, "a value (string, number, true, false or list)")
    if word == "true":
        return True
    if word == "false":
        return False
    raise ActionParseError(f"unquoted value {word!r}: strings must be in double quotes")


def _check(name: str, key: str, spec: ArgSpec, value: Any) -> Any:
    def bad(expected: str) -> ActionParseError:
        return ActionParseError(f"{name}: argument {key} must be {expected}, got {json.dumps(value)[:40]}")

    if spec.kind == "id":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return str(value)
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", value):
            raise bad("an element id (letters, digits, _ . : -)")
        return value
    if spec.kind == "str":
        if not isinstance(value, str):
            raise bad("a string")
        if spec.choices and value not in spec.choices:
            raise bad("one of " + ", ".join(spec.choices))
        return value
    if spec.kind == "coord":
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= COORD_MAX:
            raise bad(f"a coordinate between 0 and {COORD_MAX}")
        return value
    if spec.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100_000:
            raise bad("a non-negative integer")
        if spec.cap is not None and value > spec.cap:
            raise bad(f"at most {spec.cap:g}")
        return value
    if spec.kind == "num":
        cap = WAIT_MAX_S if spec.cap is None else spec.cap
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= cap:
            raise bad(f"a number of seconds between 0 and {cap:g}")
        return value
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if spec.kind == "list[str]":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise bad("a non-empty list of strings")
        return value
    raise AssertionError(spec.kind)


def _check_target(name: str, args: dict[str, Any]) -> None:
    pairs = {"": ("id", "x", "y"), "from_": ("from_id", "from_x", "from_y"), "to_": ("to_id", "to_x", "to_y")}
    for prefix, (k_id, k_x, k_y) in pairs.items():
        if k_id not in ACTIONS[name] or k_x not in ACTIONS[name]:
            continue
        has_id, has_x, has_y = k_id in args, k_x in args, k_y in args
        if has_x != has_y:
            raise ActionParseError(f"{name}: give both {k_x} and {k_y}, or {k_id}")
        if has_id and has_x:
            raise ActionParseError(f"{name}: give either {k_id} or {k_x}/{k_y}, not both")
        optional = name in ("type", "scroll")
        if not (has_id or has_x) and not optional:
            label = prefix.rstrip("_") + " target" if prefix else "a target"
            raise ActionParseError(f"{name}: needs {label}: {k_id}=... or {k_x}=..., {k_y}=...")
    if name in ("key",) and args["key"] not in KEYS:
        raise ActionParseError(f"key: unknown key {args['key'][:20]!r}")
    if name == "hotkey" and not all(k in KEYS for k in args["keys"]):
        raise ActionParseError("hotkey: unknown key in keys")


def parse_action(text: str) -> Action:
    """Parses one action string of the grammar into an :class:`Action`.

    Raises :class:`ActionParseError` (and nothing else) for any text that is not exactly one valid action.
    """
    if not isinstance(text, str):
        raise ActionParseError("action must be text")
    if len(text) > MAX_ACTION_CHARS:
        raise ActionParseError(f"action is longer than {MAX_ACTION_CHARS} characters")
    cur = _Cursor(text)
    name = cur.match(_NAME, "an action name")
    if name not in ACTIONS:
        # No list of valid names: the system prompt documents every action, and repeating the 14 names after
        # each failed step would put ~45 tokens of duplicated docs into the history every time.
        raise ActionParseError(f"unknown action {name[:30]!r}: use one of the actions the instructions list")
    cur.expect("(")
    args: dict[str, Any] = {}
    if cur.peek() != ")":
        while True:
            key = cur.match(_NAME, "an argument name")
            if key not in ACTIONS[name]:
                valid = ", ".join(ACTIONS[name]) or "none"
                raise ActionParseError(f"{name}: unknown argument {key[:30]!r}; valid: {valid}")
            if key in args:
                raise ActionParseError(f"{name}: argument {key} given twice")
            cur.expect("=")
            args[key] = _check(name, key, ACTIONS[name][key], _value(cur))
            if cur.peek() == ",":
                cur.pos += 1
                continue
            break
    cur.expect(")")
    if cur.peek():
        raise ActionParseError(f"unexpected text after the action at position {cur.pos}")
    for key, spec in ACTIONS[name].items():
        if spec.required and key not in args:
            raise ActionParseError(f"{name}: missing required argument {key}")
    _check_target(name, args)
    return Action(name, args)


def check_supported(action: Action, platform: str) -> None:
    """Raises :class:`UnsupportedActionError` when ``platform`` does not support ``action``."""
    allowed = PLATFORM_ACTIONS.get(platform, frozenset())
    if action.name not in allowed:
        raise UnsupportedActionError(
            f"action {action.name} is not supported on {platform}; supported: {', '.join(sorted(allowed))}"
        )
