"""The action space a model samples from: the grammar's documented forms, with element ids limited to the screen.

Free decoding lets a model write any text. A small policy then spends most of its failed episodes on
well-formed clicks of ids that are not on the screen: ids it recalls from other instances, which the page
rejects (docs/experiments/2026-12-02-first-click.md). Action spaces over the visible elements (set-of-marks
prompting, BrowserGym's bid actions) rule that out by construction. Here the harness turns the allowed actions
and the ids of the current observation into a regular expression, and the engine samples only replies that
match it (vLLM structured outputs, ``SamplingConfig.regex``). The parser is unchanged: it still checks every
reply, so a constrained reply is trusted no more than a free one.

The regex covers the forms the system prompt documents (``prompt.ACTION_DOCS``), with their arguments in that
order; the parser accepts more (any argument order, spacing), so the constraint narrows what the model may say,
never what the env accepts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from maigym_ray.actions import ACTIONS, KEYS
from maigym_ray.harness.config import ActionSpaceConfig as ActionSpaceConfig  # its old path

#: One a11y line's element id: ``[id] role "name"`` (dom_snapshot.js, the Android and desktop backends).
_A11Y_ID = re.compile(r"^\s*\[([A-Za-z0-9_.:-]{1,64})\]", re.M)
_COORD = "(?:1000|[0-9]{1,3})"
#: A JSON string without escapes or line breaks: enough for typed text and answers. Unbounded: the engine's
#: max_tokens bounds a reply anyway, and a counted repeat ({0,200}) made xgrammar compile each step's regex in
#: about 300 ms instead of 3-7 ms (the engine and the trainer compile one per step: the ids change per screen).
_TEXT = r'"[^"\\\n]*"'


def visible_ids(a11y: str) -> list[str]:
    """The element ids an accessibility text lists, in order, without repeats."""
    return list(dict.fromkeys(_A11Y_ID.findall(a11y)))


def element_lines(a11y: str) -> tuple[str, ...]:
    """The lines of an accessibility text that list an element (``[id] role "name" value=...``), stripped.

    They are what an agent can act on, with each element's state; the other lines are page text, which may
    change by itself (a MiniWoB++ page's countdown) without any action."""
    return tuple(line.strip() for line in a11y.splitlines() if _A11Y_ID.match(line))


def action_regex(actions: Iterable[str], ids: Iterable[str]) -> str:
    """A regex for one reply: one of ``actions`` in its documented form, ``id`` arguments drawn from ``ids``.

    Actions that take an element or a point (click, long_press, drag) take an element when the screen lists any,
    and a point only when it lists none (a screenshot-only turn). The alternatives come in the grammar's action
    order, so the same inputs always give the same regex (and the engine's grammar cache hits).
    """
    allowed = [name for name in ACTIONS if name in set(actions)]
    unknown = set(actions) - set(ACTIONS)
    if unknown:
        raise ValueError(f"not actions of the grammar: {sorted(unknown)}")
    # Ids are letters, digits and _ . : - (actions._check); only "." means something in a regex. re.escape would
    # also write "\-", which not every structured-output backend's regex dialect accepts outside a class.
    id_list = [i.replace(".", r"\.") for i in dict.fromkeys(ids)]
    ident = '"(?:' + "|".join(id_list) + ')"' if id_list else ""
    xy = f"x={_COORD}, y={_COORD}"
    keys = '"(?:' + "|".join(sorted(KEYS)) + ')"'
    forms: dict[str, list[str]] = {
        "click": [f"id={ident}", xy],
        "long_press": [f"id={ident}(?:, duration_ms=[0-9]{{1,4}})?", f"{xy}(?:, duration_ms=[0-9]{{1,4}})?"],
        "type": [
            f"id={ident}, text={_TEXT}(?:, enter=(?:true|false))?",
            f"text={_TEXT}(?:, enter=(?:true|false))?",
        ],
        "scroll": [
            f'direction="(?:up|down|left|right)"(?:, id={ident})?(?:, amount=[0-9]{{1,4}})?',
            'direction="(?:up|down|left|right)"(?:, amount=[0-9]{1,4})?',
        ],
        "swipe": [f"from_x={_COORD}, from_y={_COORD}, to_x={_COORD}, to_y={_COORD}"],
        "drag": [
            f"from_id={ident}, to_id={ident}",
            f"from_x={_COORD}, from_y={_COORD}, to_x={_COORD}, to_y={_COORD}",
        ],
        "key": [f"key={keys}"],
        "hotkey": [f"keys=\\[{keys}(?:, {keys}){{0,3}}\\]"],
        "open_app": [f"name={_TEXT}"],
        "navigate_back": [""],
        "navigate_home": [""],
        "wait": ["seconds=(?:10|[0-9])"],
        "answer": [f"text={_TEXT}"],
        "terminate": ['status="(?:success|failure)"'],
    }
    alternatives = []
    for name in allowed:
        for args in forms[name]:
            if "id=" in args and not ident:
                continue  # an id form with no id on the screen
            if "x=" in args and ident and name in ("click", "long_press", "drag"):
                continue  # the screen's elements are the targets
            alternatives.append(f"{name}\\({args}\\)")
    return "(?:" + "|".join(alternatives) + ")"
