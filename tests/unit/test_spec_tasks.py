"""Unit tests for tasks derived from app specs (maigym_ray/synth/spec_tasks.py): every derived task fails on the
initial state, and its golden solution, replayed in process through the same screens' element ids, reaches its
verifier's goal. (Live validation on Chromium is benchmarks/synthesis.py.)"""

from __future__ import annotations

import re

import pytest

from maigym_ray.apps.app import Redirect, Request
from maigym_ray.apps.registry import APP_CLASSES, SPEC_APPS
from maigym_ray.synth.spec_multi import create_then_tasks
from maigym_ray.synth.spec_suite import FULL, derive_with_cross_share
from maigym_ray.synth.spec_tasks import single_action_tasks
from maigym_ray.tasks.verifiers import run_verifier
from maigym_ray.types import TaskSpec

pytestmark = pytest.mark.unit

_ACT = re.compile(r'^(click|type)\(id="([^"]+)"(?:, text="([^"]*)")?\)$')


def replay(app, golden: list[str]) -> None:
    """Replays a golden solution against the app's handlers: links and buttons by their data-mg-id, as a browser
    would (a minimal in-process stand-in; Chromium does this for real in the benchmark)."""
    page = app.home(Request())
    form: dict[str, str] = {}
    for act in golden:
        kind, mid, text = _ACT.match(act).groups()
        m = re.search(rf'<[^>]*data-mg-id="{re.escape(mid)}"[^>]*>', page)
        assert m, f"{act}: no such element on the screen"
        tag = m.group(0)
        if kind == "type":
            form[re.search(r'name="([^"]+)"', tag).group(1)] = text
            continue
        if tag.startswith("<input"):
            form[re.search(r'name="([^"]+)"', tag).group(1)] = re.search(r'value="([^"]*)"', tag).group(1)
            continue
        href = re.search(r'href="([^"]+)"', tag)
        if href and not href.group(1).startswith("#"):
            path = href.group(1).removeprefix(f"/{app.name}")
        else:  # a submit button, or a dialog link: the form that holds it, or the dialog's form
            anchor = href.group(1)[1:] if href else None
            before = page[: m.start()] if anchor is None else page[page.index(f'id="{anchor}"') :]
            action = re.findall(r'<form[^>]*action="([^"]+)"', before)
            path = (action[-1] if anchor is None else action[0]).removeprefix(f"/{app.name}")
            if anchor is not None:
                continue  # opening a dialog changes nothing; its "-yes" button posts next
        page = _request(app, path, form if 'type="submit"' in tag else None)
        if 'type="submit"' in tag:
            form = {}


def _request(app, path: str, form: dict[str, str] | None) -> str:
    for route in app.routes():
        pat = "^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", route.path) + "$"
        hit = re.match(pat, path.split("?")[0])
        if hit and route.method == ("POST" if form is not None else "GET"):
            out = route.handler(Request(params=hit.groupdict(), form=form or {}))
            return _request(app, out.path, None) if isinstance(out, Redirect) else out
    raise AssertionError(f"no route for {path}")


@pytest.mark.parametrize("name", SPEC_APPS)
def test_derived_tasks_fail_initially_and_their_golden_reaches_the_goal(name: str) -> None:
    cls = APP_CLASSES[name]
    tasks = single_action_tasks(cls.SPEC, cls().state(), per_action=2)
    kinds = {a["kind"] for a in cls.SPEC["actions"]}
    assert {t["tags"][1].removeprefix("action:") for t in tasks} == kinds
    for t in tasks:
        TaskSpec(**{**t, "apps": tuple(t["apps"]), "golden": tuple(t["golden"]), "tags": tuple(t["tags"])})
        app = cls()
        assert not run_verifier(t["verifier"], {name: app.state()}, None).success, t["id"]
        replay(app, t["golden"])
        assert run_verifier(t["verifier"], {name: app.state()}, None).success, t["id"]


def test_no_derived_task_of_any_kind_passes_on_the_initial_state() -> None:
    """The full derivation (every kind, cross-app included) leaves out a task whose goal the default state
    already meets: a booking of a record that is already booked, or a cross-app value a record already holds.
    Live validation would reject it as ``verifier_passes_initial_state``."""
    states = {name: APP_CLASSES[name]().state() for name in SPEC_APPS}
    passing = [
        t["id"]
        for t in derive_with_cross_share(SPEC_APPS, FULL, 0.5)
        if run_verifier(t["verifier"], {a: states[a] for a in t["apps"]}, None).success
    ]
    assert passing == []


@pytest.mark.parametrize("name", SPEC_APPS)
def test_create_then_act_goldens_reach_the_goal(name: str) -> None:
    """An edit right after a create types values of each field's type (a date field gets a date), so its
    golden solution reaches the goal."""
    cls = APP_CLASSES[name]
    for t in create_then_tasks(cls.SPEC, cls().state(), 4):
        app = cls()
        replay(app, t["golden"])
        assert run_verifier(t["verifier"], {name: app.state()}, None).success, t["id"]
