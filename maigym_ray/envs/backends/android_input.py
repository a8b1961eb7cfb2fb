"""How the action grammar becomes Android ``input`` shell commands (tap, swipe, text, keyevent, draganddrop).

Pure: targets are element ids (the centre of the element's box, from the last observation) or x/y
normalised to 0..1000 of the screen. An agent mistake (an unknown id, text adb cannot type) comes back as a
message instead of commands.
"""

from __future__ import annotations

import shlex
from typing import Any

from maigym_ray.types import Action, Element

#: The grammar's key names as Android keycodes (``input keyevent``).
KEYCODES: dict[str, int] = {
    "Enter": 66,
    "Tab": 61,
    "Escape": 111,
    "Backspace": 67,
    "Delete": 112,
    "Space": 62,
    "ArrowUp": 19,
    "ArrowDown": 20,
    "ArrowLeft": 21,
    "ArrowRight": 22,
    "Home": 122,
    "End": 123,
    "PageUp": 92,
    "PageDown": 93,
    "Control": 113,
    "Shift": 59,
    "Alt": 57,
    "Meta": 117,
    **{chr(c): 29 + c - ord("a") for c in range(ord("a"), ord("z") + 1)},
    **{str(d): 7 + d for d in range(10)},
    **{f"F{i}": 130 + i for i in range(1, 13)},
}
KEY_BACK, KEY_HOME, KEY_ENTER, KEY_DEL, KEY_MOVE_END = 4, 3, 66, 67, 123


class AndroidInput:
    """The ``input`` commands of actions on a screen of ``width`` x ``height`` pixels showing ``elements``."""

    def __init__(self, elements: dict[str, Element], width: int, height: int, long_press_ms: int) -> None:
        self._elements = elements
        self.width, self.height = width, height
        self.long_press_ms = long_press_ms

    def _point(self, args: dict[str, Any], prefix: str = "") -> tuple[int, int] | str:
        if f"{prefix}id" in args:
            el = self._elements.get(str(args[f"{prefix}id"]))
            if el is None:
                return f"no element with id {args[prefix + 'id']!r} on this screen"
            return el.x, el.y
        x = round(args[f"{prefix}x"] * (self.width - 1) / 1000)
        y = round(args[f"{prefix}y"] * (self.height - 1) / 1000)
        return x, y

    def _element_at(self, args: dict[str, Any], pt: tuple[int, int]) -> Element | None:
        """The text box a type action targets: its id, or the smallest text box around the point."""
        if "id" in args:
            el = self._elements.get(str(args["id"]))
            return el if el is not None and el.role == "textbox" else None
        boxes = [
            e
            for e in self._elements.values()
            if e.role == "textbox" and abs(pt[0] - e.x) * 2 <= e.w and abs(pt[1] - e.y) * 2 <= e.h
        ]
        return min(boxes, key=lambda e: e.w * e.h, default=None)

    def commands(self, action: Action) -> list[str] | str:
        """The shell commands of one action, or an agent-mistake message."""
        name, a = action.name, action.args
        if name in ("click", "long_press"):
            pt = self._point(a)
            if isinstance(pt, str):
                return pt
            if name == "click":
                return [f"input tap {pt[0]} {pt[1]}"]
            ms = a.get("duration_ms") or self.long_press_ms
            return [f"input swipe {pt[0]} {pt[1]} {pt[0]} {pt[1]} {ms}"]
        if name == "type":
            cmds = []
            if "id" in a or "x" in a:  # like the web backend: a targeted type replaces the field's text
                pt = self._point(a)
                if isinstance(pt, str):
                    return pt
                cmds.append(f"input tap {pt[0]} {pt[1]}")
                field = self._element_at(a, pt)
                if field is not None and field.value:
                    cmds.append(
                        f"input keyevent {KEY_MOVE_END} " + " ".join([str(KEY_DEL)] * len(field.value))
                    )
            text = a["text"]
            if not text.isascii() or any(c < " " and c != "\n" for c in text):
                return "type: adb can only type printable ASCII text and line breaks on android"
            for i, part in enumerate(text.split("\n")):
                if i:
                    cmds.append(f"input keyevent {KEY_ENTER}")
                if part:
                    cmds.append("input text " + shlex.quote(part.replace(" ", "%s")))
            if a.get("enter"):
                cmds.append(f"input keyevent {KEY_ENTER}")
            return cmds
        if name == "scroll":
            pt = self._point(a) if ("id" in a or "x" in a) else (self.width // 2, self.height // 2)
            if isinstance(pt, str):
                return pt
            d = a["direction"]
            vertical = d in ("up", "down")
            span = self.height if vertical else self.width
            dist = min(a.get("amount") or int(span * 0.5), span - 2)
            # the finger moves against the scroll direction: scrolling down drags the content up
            sign = 1 if d in ("down", "right") else -1
            c = pt[1] if vertical else pt[0]
            start = min(max(c + sign * dist // 2, 1), span - 2)
            end = min(max(start - sign * dist, 1), span - 2)
            if vertical:
                return [f"input swipe {pt[0]} {start} {pt[0]} {end} 400"]
            return [f"input swipe {start} {pt[1]} {end} {pt[1]} 400"]
        if name == "swipe":
            fx, fy = self._point({"x": a["from_x"], "y": a["from_y"]})  # type: ignore[misc]
            tx, ty = self._point({"x": a["to_x"], "y": a["to_y"]})  # type: ignore[misc]
            return [f"input swipe {fx} {fy} {tx} {ty} 300"]
        if name == "drag":
            src, dst = self._point(a, "from_"), self._point(a, "to_")
            for pt in (src, dst):
                if isinstance(pt, str):
                    return pt
            ms = self.long_press_ms + 700
            return [f"input draganddrop {src[0]} {src[1]} {dst[0]} {dst[1]} {ms}"]  # type: ignore[index]
        if name == "key":
            return [f"input keyevent {KEYCODES[a['key']]}"]
        if name == "navigate_back":
            return [f"input keyevent {KEY_BACK}"]
        if name == "navigate_home":
            return [f"input keyevent {KEY_HOME}"]
        return f"action {name} is not supported on android"
