"""What an Android device shows, read from adb's output: a ``uiautomator dump`` as the accessibility text and
elements the agent acts on (:func:`parse_hierarchy`), and the size of a ``screencap -p`` PNG."""

from __future__ import annotations

import re
import struct
from xml.etree import ElementTree

from maigym_ray.types import Element

#: Roles of widget classes (by the class name's last part); clickable unknown classes are buttons.
ROLES: dict[str, str] = {
    "EditText": "textbox",
    "AutoCompleteTextView": "textbox",
    "MultiAutoCompleteTextView": "textbox",
    "CheckBox": "checkbox",
    "CheckedTextView": "checkbox",
    "RadioButton": "radio",
    "Switch": "switch",
    "SwitchCompat": "switch",
    "ToggleButton": "switch",
    "Button": "button",
    "ImageButton": "button",
    "FloatingActionButton": "button",
    "SeekBar": "slider",
    "RatingBar": "slider",
    "Spinner": "combobox",
    "ImageView": "image",
    "WebView": "webview",
    "ScrollView": "scrollable",
    "HorizontalScrollView": "scrollable",
    "RecyclerView": "list",
    "ListView": "list",
    "GridView": "list",
    "TabWidget": "tablist",
    "ProgressBar": "progressbar",
    "TextView": "text",
}
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:-]")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _role(cls: str, clickable: bool) -> str:
    role = ROLES.get(cls.rsplit(".", 1)[-1])
    return role or ("button" if clickable else "group")


def _clean(text: str, limit: int = 100) -> str:
    return " ".join(text.split()).replace('"', "'")[:limit]


def parse_hierarchy(xml: str) -> tuple[str, list[Element], str]:
    """A ``uiautomator dump`` as (accessibility lines, elements, foreground package).

    Nodes are listed when they can be acted on (clickable, long-clickable, checkable, scrollable, editable)
    or say something (text or content-desc), and have a non-empty box. Raises ValueError on output that holds
    no hierarchy.
    """
    start = xml.find("<hierarchy")
    end = xml.rfind("</hierarchy>")
    if start < 0 or end < 0:
        raise ValueError(f"no UI hierarchy in the dump output: {xml[:200]!r}")
    try:
        root = ElementTree.fromstring(xml[start : end + len("</hierarchy>")])
    except ElementTree.ParseError as exc:
        raise ValueError(f"unparsable UI hierarchy: {exc}") from exc
    lines: list[str] = []
    elements: list[Element] = []
    seen: dict[str, int] = {}
    package = ""
    ordinal = 0
    for node in root.iter("node"):
        a = node.attrib
        package = package or a.get("package", "")
        m = _BOUNDS.fullmatch(a.get("bounds", ""))
        if not m:
            continue
        x1, y1, x2, y2 = (int(v) for v in m.groups())
        if x2 <= x1 or y2 <= y1:
            continue

        def flag(key: str, a: dict[str, str] = a) -> bool:
            return a.get(key) == "true"

        cls = a.get("class", "")
        role = _role(cls, flag("clickable"))
        text, desc, hint = (
            _clean(a.get("text", "")),
            _clean(a.get("content-desc", "")),
            _clean(a.get("hint", "")),
        )
        rid = a.get("resource-id", "")
        short = rid.split(":id/", 1)[-1] if rid else ""
        actionable = any(flag(k) for k in ("clickable", "long-clickable", "checkable", "scrollable"))
        if not (actionable or role == "textbox" or text or desc):
            continue
        value = ""
        if role == "textbox":
            name, value = desc or hint or short.replace("_", " "), text
        else:
            name = text or desc or hint
        ordinal += 1
        base = _ID_CHARS.sub("_", short)[:60] if short else f"e{ordinal}"
        seen[base] = seen.get(base, 0) + 1
        eid = base if seen[base] == 1 else f"{base}_{seen[base]}"
        line = f'[{eid}] {role} "{name}"'
        if role == "textbox":
            line += f' value="{value}"'
        if flag("checkable") and flag("checked"):
            line += " checked"
        for key in ("selected", "focused"):
            if flag(key):
                line += f" {key}"
        if a.get("enabled") == "false":
            line += " disabled"
        if flag("scrollable") and role not in ("list", "scrollable"):
            line += " scrollable"
        lines.append(line)
        elements.append(Element(eid, role, name, (x1 + x2) // 2, (y1 + y2) // 2, x2 - x1, y2 - y1, value))
    return "\n".join(lines), elements, package


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG; ValueError when ``data`` is not one."""
    if not data.startswith(_PNG_SIGNATURE) or len(data) < 24 or data[12:16] != b"IHDR":
        raise ValueError(f"not a PNG: {data[:40]!r}")
    return struct.unpack(">II", data[16:24])
