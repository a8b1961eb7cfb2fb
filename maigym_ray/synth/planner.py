"""The planner: turns a task's plan (what to do, in screen terms) into a golden solution in the action grammar.

A plan is a list of steps that name things the way the screen shows them ("the message whose subject says
*Project kickoff*", "the train row that arrives before the time read from the email"), never element ids and
never the verifier's expected values. The planner walks the plan over :class:`~maigym_ray.synth.screens.Screens`:
it finds each element on the rendered page, reads facts off the page into variables, and emits one action per
interaction. The verifier is written by the template from the world's facts, on a separate path: validation
then checks that the two agree on a live instance.

Steps (all plain data, plus small pure functions for choices and arithmetic over what was read):

- ``Open(app)``: ``open_app`` unless the app is already on screen;
- ``Click(id)`` / ``ClickText(prefix, text)``: a fixed control, or the element of a list that shows ``text``;
- ``ClickRow(prefix, pick)``: ``pick(rows, vars)`` chooses among ``(id, row text)`` of a list (a train that
  arrives in time, the cheapest hotel);
- ``Type(id, text)``: ``text`` may name variables as ``{var}``;
- ``Read(regex, names)``: the regex's groups over the page's visible text become variables;
- ``Compute(name, fn)``: ``vars[name] = fn(vars)`` (the day after a date, a time plus 90 minutes);
- ``Answer(text)``: the final ``answer`` action (``{var}`` allowed); ``Terminate()``: ``terminate(status=...)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import TaskError
from maigym_ray.synth.screens import Screens


@dataclass(frozen=True)
class Open:
    """Switch to ``app`` (``open_app``) unless it is on screen."""

    app: str


@dataclass(frozen=True)
class Click:
    """Click a fixed control by its id."""

    id: str


@dataclass(frozen=True)
class ClickText:
    """Click the element (id starting with ``prefix``) that shows ``text``; ``{var}`` allowed in ``text``."""

    prefix: str
    text: str


@dataclass(frozen=True)
class ClickRow:
    """Click the row that ``pick(rows, vars)`` chooses; ``rows`` are ``(id, row text)`` in page order."""

    prefix: str
    pick: Callable[[list[tuple[str, str]], dict[str, str]], str]


@dataclass(frozen=True)
class Type:
    """Type ``text`` (``{var}`` allowed) into the field ``id``."""

    id: str
    text: str


@dataclass(frozen=True)
class Read:
    """Read facts off the screen: the regex's groups (searched in the page text) become ``names``."""

    regex: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Compute:
    """``vars[name] = fn(vars)``."""

    name: str
    fn: Callable[[dict[str, str]], str]


@dataclass(frozen=True)
class Answer:
    """The ``answer`` action with ``text`` (``{var}`` allowed)."""

    text: str


@dataclass(frozen=True)
class Terminate:
    """The final ``terminate(status="success")`` (tasks whose episodes end by declaring success)."""


Step = Open | Click | ClickText | ClickRow | Type | Read | Compute | Answer | Terminate


def action(verb: str, **args: str) -> str:
    """One action in the harness grammar, e.g. ``click(id="send")``; strings are JSON-quoted (safe escapes)."""
    return f"{verb}(" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) + ")"


def _fill(text: str, env: dict[str, str]) -> str:
    try:
        return text.format(**env)
    except KeyError as exc:
        raise TaskError(f"plan uses {exc} before reading it") from None


def plan_golden(
    plan: Sequence[Step], seeds: dict[str, Any], start_app: str, apps: Sequence[str] = ()
) -> tuple[list[str], dict[str, Any]]:
    """Runs ``plan`` over in-process screens seeded with ``seeds`` starting on ``start_app``'s first screen.

    Returns the golden actions and the app states the plan leaves behind (plus ``"__answer__"``). Raises
    :class:`TaskError` when a step does not fit the screen (the element is not there, the regex reads nothing):
    the task is then rejected with that reason, before it costs a live instance.
    """
    screens = Screens(seeds, apps)
    screens.open_app(start_app)
    env: dict[str, str] = {}
    out: list[str] = []
    answer: str | None = None
    for step in plan:
        if isinstance(step, Open):
            if screens.page.path.split("/")[1] != step.app:
                screens.open_app(step.app)
                out.append(action("open_app", name=step.app))
        elif isinstance(step, Click):
            screens.click(step.id)
            out.append(action("click", id=step.id))
        elif isinstance(step, ClickText):
            mg = screens.find(step.prefix, _fill(step.text, env))
            screens.click(mg)
            out.append(action("click", id=mg))
        elif isinstance(step, ClickRow):
            mg = step.pick(screens.rows(step.prefix), env)
            if not mg:
                raise TaskError(f"no {step.prefix}* row on {screens.page.path} fits the task")
            screens.click(mg)
            out.append(action("click", id=mg))
        elif isinstance(step, Type):
            text = _fill(step.text, env)
            screens.type(step.id, text)
            out.append(action("type", id=step.id, text=text))
        elif isinstance(step, Read):
            m = re.search(step.regex, screens.page.text)
            if m is None:
                raise TaskError(f"could not read /{step.regex}/ on {screens.page.path}")
            env.update(zip(step.names, m.groups(), strict=True))
        elif isinstance(step, Compute):
            env[step.name] = step.fn(env)
        elif isinstance(step, Terminate):
            out.append(action("terminate", status="success"))
        elif isinstance(step, Answer):
            answer = _fill(step.text, env)
            out.append(action("answer", text=answer))
        else:  # pragma: no cover - the Step union is closed
            raise TaskError(f"unknown plan step {step!r}")
    state = screens.state()
    state["__answer__"] = answer
    return out, state
