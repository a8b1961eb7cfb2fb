"""What to draw on a step's screenshot for its action: a click marker, a swipe arrow, typed text.

Coordinates of the grammar are normalised to 0..1000 on both axes (actions.py), so the front end draws
them as percentages of the image whatever its size. An action that targets an element by ``id`` has no position
in the store (element boxes are not recorded), so it gets a label only.
"""

from __future__ import annotations

from typing import Any

from maigym_ray.actions import parse_action

_POINT = ("click", "long_press", "type", "scroll")
_LINE = ("swipe", "drag")


def overlay(action_text: str) -> dict[str, Any]:
    """The overlay of one action: ``{"kind": "point"|"arrow"|"none", "label": str, ...}`` with
    ``x``/``y`` (point) or ``from_x``/``from_y``/``to_x``/``to_y`` (arrow) in 0..1000, and ``text`` for type."""
    try:
        action = parse_action(action_text)
    except Exception:  # a parse error is shown as such; nothing is drawn
        return {"kind": "none", "label": "unparsed"}
    a = action.args
    out: dict[str, Any] = {"kind": "none", "label": action.name}
    if action.name in _POINT and "x" in a and "y" in a:
        out.update(kind="point", x=a["x"], y=a["y"])
    elif action.name in _LINE and all(k in a for k in ("from_x", "from_y", "to_x", "to_y")):
        out.update(kind="arrow", from_x=a["from_x"], from_y=a["from_y"], to_x=a["to_x"], to_y=a["to_y"])
    if "id" in a:
        out["label"] = f"{action.name} [{a['id']}]"
    if action.name == "scroll":
        out["label"] = f"scroll {a['direction']}"
    if action.name in ("type", "answer") and "text" in a:
        out["text"] = a["text"]
    if action.name in ("key", "hotkey"):
        out["text"] = a.get("key") or "+".join(a.get("keys", []))
    return out
