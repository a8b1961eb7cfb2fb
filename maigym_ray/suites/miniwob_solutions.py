"""Scripted reference solutions for MiniWoB++ tasks, in the action grammar, from what the agent observes.

Each solver reads only the observation the backend gives every agent: the page's instruction (the first a11y
line) and the elements with their ids, roles and names. It never reads the page's reward or its scripts, so a
trajectory it produces through ``run_episode`` is a golden demonstration (for SFT) made on the same path a
model acts on. :class:`MiniwobScriptedPolicy` is the PolicyClient; :data:`SOLVERS` says which tasks have one.

A solver is called once per step with the instruction, the observation and a per-episode scratch dict, and
returns the next action text (it may plan several steps ahead in the scratch dict).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from maigym_ray.types import Element, Observation, TaskSpec

Solver = Callable[[str, Observation, dict[str, Any]], str]


def instruction(obs: Observation) -> str:
    """The page's instruction: the ``instruction "..."`` line the MiniWoB++ backend puts first."""
    first = obs.a11y.split("\n", 1)[0]
    return first[len('instruction "') : -1] if first.startswith('instruction "') else ""


def _quoted(text: str) -> list[str]:
    return re.findall(r'"([^"]*)"', text)


def _find(
    obs: Observation, role: str | tuple[str, ...] | None = None, name: str | None = None
) -> list[Element]:
    roles = (role,) if isinstance(role, str) else role
    return [
        e
        for e in obs.elements
        if (roles is None or e.role in roles) and (name is None or e.name.strip() == name.strip())
    ]


def _one(obs: Observation, role: str | tuple[str, ...] | None, name: str | None) -> Element:
    found = _find(obs, role, name)
    if not found:
        raise LookupError(f"no {role} named {name!r} on the screen")
    return found[0]


def _click(e: Element) -> str:
    return f'click(id="{e.id}")'


def _type(e: Element, text: str) -> str:
    return f'type(id="{e.id}", text={_json(text)})'


def _json(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)


def _plan(scratch: dict[str, Any], make: Callable[[], list[str]]) -> str:
    """Computes a plan on the first call of the episode, then hands out one step at a time."""
    if "plan" not in scratch:
        scratch["plan"] = make()
    plan: list[str] = scratch["plan"]
    return plan.pop(0) if plan else 'terminate(status="success")'


def _submit(obs: Observation, names: tuple[str, ...] = ("Submit", "submit")) -> Element:
    for n in names:
        found = _find(obs, "button", n)
        if found:
            return found[0]
    raise LookupError("no submit button")


# -- solvers --------------------------------------------------------------------------------------------------
def click_named_button(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Click on the "X" button.'"""
    return _plan(s, lambda: [_click(_one(obs, "button", _quoted(utt)[0]))])


def click_link(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Click on the link "X".' (the links are text spans)."""
    return _plan(s, lambda: [_click(_one(obs, None, _quoted(utt)[0]))])


def click_dialog(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Close the dialog box by clicking the "x".' (jQuery UI's close button is named Close)."""
    return _plan(s, lambda: [_click(_one(obs, "button", "Close"))])


def click_dialog_2(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Click the button in the dialog box labeled "X".' with X in Cancel, OK, x."""
    want = _quoted(utt)[0]
    return _plan(s, lambda: [_click(_one(obs, "button", "Close" if want == "x" else want))])


def enter_text(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Enter "X" into the text field and press Submit.'"""
    return _plan(s, lambda: [_type(_find(obs, "textbox")[0], _quoted(utt)[0]), _click(_submit(obs))])


def enter_text_2(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Type "X" in all upper/lower case letters in the text input and press Submit.'"""
    text = _quoted(utt)[0]
    text = text.upper() if "upper case" in utt else text.lower()
    return _plan(s, lambda: [_type(_find(obs, "textbox")[0], text), _click(_submit(obs))])


def focus_text(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Focus into the textbox.' / 'Focus into the 2nd input textbox.'"""
    m = re.search(r"(\d)(?:st|nd|rd|th)", utt)
    index = int(m.group(1)) - 1 if m else 0
    return _plan(s, lambda: [_click(_find(obs, "textbox")[index])])


def select_boxes(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Select a, b and click Submit.' (checkboxes) or 'Select a and click Submit.' (radio buttons)."""
    m = re.match(r"Select (.*) and click Submit\.", utt)
    wanted = [] if not m or m.group(1) == "nothing" else [w.strip() for w in m.group(1).split(",")]

    def make() -> list[str]:
        return [_click(_one(obs, ("checkbox", "radio"), w)) for w in wanted] + [_click(_submit(obs))]

    return _plan(s, make)


def choose_list(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Select X from the list and click Submit.': focus the list, pick by typing the option's text."""
    want = re.match(r"Select (.*) from the list and click Submit\.", utt).group(1)  # type: ignore[union-attr]

    def make() -> list[str]:
        box = _find(obs, "combobox")[0]
        keys = [f"key(key={_json(k)})" for k in _keys_for(want)]
        return [_click(box), *keys, 'key(key="Enter")', _click(_submit(obs))]

    return _plan(s, make)


def _keys_for(text: str, most: int = 10) -> list[str]:
    # A native <select> jumps to the first option whose text starts with what was typed (case-insensitively,
    # spaces included); a prefix of up to ``most`` keys keeps the episode within its step limit.
    keys: list[str] = []
    for c in text[:most]:
        if c == " ":
            keys.append("Space")
        elif c.isascii() and c.isalnum():
            keys.append(c.lower())
        else:  # a character the grammar has no key for: the prefix so far has to do
            break
    return keys or ["Space"]


def enter_password(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Enter the password "X" into both text fields and press submit.'"""
    pw = _quoted(utt)[0]
    return _plan(s, lambda: [*(_type(b, pw) for b in _find(obs, "textbox")[:2]), _click(_submit(obs))])


def login_user(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Enter the username "u" and the password "p" into the text fields and press login.'"""
    user, pw = _quoted(utt)[:2]

    def make() -> list[str]:
        boxes = _find(obs, "textbox")
        return [_type(boxes[0], user), _type(boxes[1], pw), _click(_submit(obs, ("Login", "login")))]

    return _plan(s, make)


def click_tab(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Click on Tab #2.'"""
    tab = re.search(r"Tab #\d", utt).group(0)  # type: ignore[union-attr]
    return _plan(s, lambda: [_click(_one(obs, ("tab", "link"), tab))])


def click_tab_2(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Switch between the tabs to find and click on the link "X".': open tabs until the link shows."""
    want = _quoted(utt)[0]
    here = [e for e in _find(obs, None, want) if e.role not in ("tab", "link") and e.w > 0]
    if here:
        return _click(here[0])
    tried: list[str] = s.setdefault("tabs", [])
    for tab in _find(obs, "tab"):
        if tab.name not in tried:
            tried.append(tab.name)
            return _click(tab)
    return 'terminate(status="failure")'


def click_button_sequence(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Click button ONE, then click button TWO.'"""
    return _plan(s, lambda: [_click(_one(obs, "button", "ONE")), _click(_one(obs, "button", "TWO"))])


def click_test(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Click the button.'"""
    return _plan(s, lambda: [_click(_find(obs, "button")[0])])


def click_test_2(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Click button ONE.'"""
    return _plan(s, lambda: [_click(_one(obs, "button", re.search(r"button (\w+)", utt).group(1)))])  # type: ignore[union-attr]


def click_collapsible(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Expand the section below and click submit.' (the section header is an accordion tab)."""
    step = s.setdefault("step", 0)
    s["step"] = step + 1
    if step == 0:
        return _click(_find(obs, "tab")[0])
    # jQuery UI makes the paragraph around the Submit button a header too; it reads as a tab named Submit
    return _click(_one(obs, None, "Submit"))


def click_collapsible_2(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Expand the sections below, to find and click on the link "X".': like click-tab-2, but a section opens
    with an animation, so look only once it has settled (a short wait after each header click)."""
    if s.pop("opened", False):
        return "wait(seconds=0.5)"
    action = click_tab_2(utt, obs, s)
    s["opened"] = any(action == _click(t) for t in _find(obs, "tab"))
    return action


def simple_arithmetic(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Solve the math problem ...': the problem is a text line "a op b =" on the screen."""
    m = re.search(r"(-?\d+) ([-+x]) (-?\d+) =", obs.a11y)
    if not m:
        return 'terminate(status="failure")'
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    answer = a + b if op == "+" else a - b if op == "-" else a * b
    return _plan(s, lambda: [_type(_find(obs, "textbox")[0], str(answer)), _click(_submit(obs))])


def _field(label: str) -> str:
    low = label.lower()
    for key, words in (("genre", ("genre",)), ("director", ("director",)), ("year", ("year", "date"))):
        if any(w in low for w in words):
            return key
    return ""


def search_form(utt: str, obs: Observation, s: dict[str, Any]) -> str:
    """'Search for <genre> movies directed by <director> from year <year>.': five layouts put each field's
    label (Genre, Director Name, Released Date, ...) next to its textbox, before it or, in one, after it;
    the submit control is named Submit, Search or Go!."""
    m = re.match(r"Search for (.*) movies directed by (.*) from year (.*)\.", utt)
    values = {"genre": m.group(1), "director": m.group(2), "year": m.group(3)}  # type: ignore[union-attr]

    def make() -> list[str]:
        els = [e for e in obs.elements if e.role == "textbox" or _field(e.name)]
        after = bool(els) and els[0].role == "textbox"  # the labels follow their boxes
        steps = []
        for i, e in enumerate(els):
            j = i + 1 if after else i - 1
            if e.role == "textbox" and 0 <= j < len(els) and els[j].role != "textbox":
                steps.append(_type(e, values[_field(els[j].name)]))
        submit = [e for e in obs.elements if e.name.strip() in ("Submit", "Search", "Go!")]
        return [*steps, _click(submit[-1])]

    return _plan(s, make)


#: Tasks with a scripted solution, by MiniWoB++ task name.
SOLVERS: dict[str, Solver] = {
    "click-button": click_named_button,
    "unicode-test": click_named_button,
    "click-link": click_link,
    "click-dialog": click_dialog,
    "click-dialog-2": click_dialog_2,
    "enter-text": enter_text,
    "enter-text-dynamic": enter_text,
    "enter-text-2": enter_text_2,
    "focus-text": focus_text,
    "focus-text-2": focus_text,
    "click-checkboxes": select_boxes,
    "click-checkboxes-large": select_boxes,
    "click-checkboxes-transfer": select_boxes,
    "click-option": select_boxes,
    "choose-list": choose_list,
    "enter-password": enter_password,
    "login-user": login_user,
    "click-tab": click_tab,
    "click-tab-2": click_tab_2,
    "click-button-sequence": click_button_sequence,
    "click-test": click_test,
    "click-test-2": click_test_2,
    "click-collapsible": click_collapsible,
    "click-collapsible-2": click_collapsible_2,
    "multi-orderings": search_form,
    "multi-layouts": search_form,
    "simple-arithmetic": simple_arithmetic,
}


def task_name(task: TaskSpec) -> str:
    """The MiniWoB++ task name of a TaskSpec made by :func:`maigym_ray.suites.miniwob.miniwob_task`."""
    return str(task.initial_state.get("miniwob", {}).get("task", ""))


class MiniwobScriptedPolicy:
    """PolicyClient that acts with the task's scripted solution (a TaskError-free fallback: it terminates with
    failure on a task it has no solver for, or when its solver finds nothing to act on)."""

    def __init__(self) -> None:
        self._scratch: dict[str, dict[str, Any]] = {}

    async def act(self, task: TaskSpec, observation: Observation, step: int, episode_id: str = "") -> str:
        solver = SOLVERS.get(task_name(task))
        if solver is None:
            return 'terminate(status="failure")'
        scratch = self._scratch.setdefault(episode_id, {})
        try:
            return solver(instruction(observation), observation, scratch)
        except (LookupError, AttributeError, IndexError):  # the screen is not what the solver expects
            return 'terminate(status="failure")'

    def end_episode(self, episode_id: str) -> None:
        """Forgets the episode's plan (run_episode calls it)."""
        self._scratch.pop(episode_id, None)
