"""Unit tests for synthesis (maigym_ray/synth): worlds, screens, planner, templates, pre-check, splits, pools.

No browser: the in-process screens render the real apps. Live validation is in
tests/integration/test_synth_validation.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from maigym_ray.actions import parse_action
from maigym_ray.apps.registry import APP_CLASSES, NOVEL_APPS, make_apps
from maigym_ray.errors import TaskError
from maigym_ray.synth.generate import Rejection, draft_to_task, drafts_for, generate, split_of, tier
from maigym_ray.synth.planner import Answer, Click, ClickText, Open, Read, Type, action, plan_golden
from maigym_ray.synth.screens import Screens
from maigym_ray.synth.templates import TEMPLATES, Draft, absent, exists
from maigym_ray.synth.world import make_world
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.types import TaskSpec

pytestmark = pytest.mark.unit

WORLDS = range(6)


@pytest.fixture(scope="module")
def pool() -> tuple[list[TaskSpec], list[Rejection]]:
    return generate(WORLDS)


# -- worlds ---------------------------------------------------------------------------------------------------------
def test_same_seed_same_world_byte_for_byte() -> None:
    for seed in (0, 7, 123):
        assert make_world(seed).to_json() == make_world(seed).to_json()
        assert json.dumps(make_world(seed).seeds(), sort_keys=True) == json.dumps(
            make_world(seed).seeds(), sort_keys=True
        )
    assert make_world(1).to_json() != make_world(2).to_json()


def test_worlds_and_pools_do_not_depend_on_the_hash_seed() -> None:
    code = (
        "import hashlib; from maigym_ray.synth.generate import generate; from maigym_ray.synth.world import make_world;"
        "from maigym_ray.tasks.pool import task_to_row; import json;"
        "t, _ = generate([5]); print(hashlib.sha256((make_world(5).to_json() + "
        "json.dumps([task_to_row(x) for x in t], sort_keys=True)).encode()).hexdigest())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": h},
            capture_output=True,
            text=True,
        ).stdout.strip()
        for h in ("1", "2")
    }
    assert len(outs) == 1 and len(outs.pop()) == 64


def test_world_seeds_fit_every_app_schema() -> None:
    for seed in range(30):
        apps = make_apps(["all"])
        for name, seed_data in make_world(seed).seeds().items():
            apps[name].seed(seed_data)  # raises AppError on a key or type the app does not know


def test_world_facts_agree_across_apps() -> None:
    w = make_world(11)
    seeds = w.seeds()
    org = w.people[0]
    invite = next(m for m in seeds["mail"]["messages"] if m["subject"] == w.main.title)
    assert invite["from"] == org.email
    assert w.main.date in invite["body"] and w.main.start in invite["body"]
    assert any(c["email"] == org.email and c["name"] == org.name for c in seeds["contacts"]["contacts"])
    money = next(m for m in seeds["mail"]["messages"] if m["subject"].startswith("Money for"))
    assert f"{w.owed:.2f}" in money["body"] and w.people[1].iban in money["body"]
    assert any(p["name"] == w.people[1].name for p in seeds["bank"]["payees"])
    trains = seeds["train"]["trains"]
    assert sum(t["date"] == w.main.date and t["arr"] < w.main.start for t in trains) >= 2  # a real choice
    # a near-date distractor: the same route the day after the event
    from maigym_ray.synth.templates import shift_day

    assert any(
        t["from"] == w.home_city and t["to"] == w.city and t["date"] == shift_day(w.main.date, 1)
        for t in trains
    )
    # the distractor: a near-name twin of the organiser
    twin = w.people[3]
    assert twin.first == org.first and twin.last != org.last and twin.last.startswith(org.last[:4])


# -- screens and planner --------------------------------------------------------------------------------------------
def test_screens_follow_links_forms_radios_and_dialogs() -> None:
    s = Screens({}, ["train", "ride"])
    s.open_app("train")
    s.type("from", "Berlin")
    s.type("to", "Munich")
    s.type("date", "2026-12-03")
    s.click("search")
    assert [i for i, _ in s.rows("train-")] == ["train-ICE501", "train-ICE503", "train-IC203"]
    s.click(s.find("train-", "10:15"))
    s.click("class-first")
    s.click("continue")
    s.type("passenger-1", "Alex Morgan")
    s.click("review")
    s.click("pay")  # a dialog link: no navigation
    s.click("pay-yes")
    booking = s.state()["train"]["bookings"][-1]
    assert booking["train"] == "IC203" and booking["class"] == "first" and booking["total"] == 89.0
    # a radio button outside its form (form="request-form"), as the ride app renders it
    s.open_app("ride")
    s.type("pickup", "Home")
    s.type("destination", "Office")
    s.click("see-prices")
    s.click(s.find("type-", "Comfort"))
    s.click("request")
    s.click("confirm-ride-yes")
    assert s.state()["ride"]["rides"][-1]["type"] == "comfort"
    with pytest.raises(TaskError, match="no element 'nope'"):
        s.click("nope")


def test_planner_reads_screens_and_emits_grammar_actions() -> None:
    w = make_world(3)
    plan = (
        Open("mail"),
        ClickText("msg-", w.main.title),
        Read(r" at (\d\d:\d\d) ", ("t",)),
        Answer("{t}"),
    )
    golden, final = plan_golden(plan, {"mail": w.seeds()["mail"]}, "mail", ("mail",))
    assert golden[-1] == action("answer", text=w.main.start)
    assert final["__answer__"] == w.main.start
    for a in golden:
        parse_action(a)  # every golden action is in the grammar
    assert parse_action(action("type", id="x", text='say "hi" \\ ok')).args["text"] == 'say "hi" \\ ok'


# -- templates, pre-check, splits ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_template_yields_tasks_that_pass_the_precheck(name: str) -> None:
    tasks, rejected = generate(WORLDS, [name])
    assert tasks, f"{name} made no task over {len(WORLDS)} worlds"
    assert not rejected, rejected[:3]
    for t in tasks:
        assert f"template:{name}" in t.tags
        for a in t.golden:
            parse_action(a)
        assert t.start_app == t.apps[0] and set(t.initial_state) == set(t.apps)


def test_pool_meets_the_scale_targets(pool: tuple[list[TaskSpec], list[Rejection]]) -> None:
    tasks, _ = pool
    assert len({a for t in tasks for a in t.apps}) >= 12
    assert sum("cross_app" in t.tags for t in tasks) / len(tasks) >= 0.4
    cross = [t for t in tasks if "cross_app" in t.tags]
    assert all(len(t.apps) >= 2 for t in cross)
    assert {t.split for t in tasks} == {"train", "test", "ood_app"}
    assert {"kind:info", "kind:state"} <= {x for t in tasks for x in t.tags}
    assert {"tier:1", "tier:2", "tier:3"} <= {x for t in tasks for x in t.tags}
    ids = [t.id for t in tasks]
    assert len(ids) == len(set(ids))


def test_novel_apps_appear_only_in_the_ood_split(pool: tuple[list[TaskSpec], list[Rejection]]) -> None:
    tasks, _ = pool
    for t in tasks:
        touches_novel = bool(set(t.apps) & set(NOVEL_APPS))
        assert (t.split == "ood_app") == touches_novel, t.id
    train_apps = {a for t in tasks if t.split == "train" for a in t.apps}
    assert not train_apps & set(NOVEL_APPS)
    assert {t.split for t in tasks if "world:0" in t.tags and t.split != "ood_app"} == {"test"}
    assert split_of(["mail"], 3, 5) == "train" and split_of(["mail"], 5, 5) == "test"
    assert split_of(["mail", "parcel"], 3, 5) == "ood_app"
    assert (tier(3), tier(4), tier(8)) == (1, 2, 3)


def _draft(**kw: object) -> Draft:
    base = Draft(
        "planted",
        "Pin the note \u201cDoor code\u201d.",
        ("notes",),
        "state",
        (exists("notes", "notes", title="Door code", pinned=True),),
        (Open("notes"), ClickText("note-", "Door code"), Click("pin")),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_precheck_admits_the_sound_draft() -> None:
    out = draft_to_task(_draft(), make_world(2), 0, 5)
    assert isinstance(out, TaskSpec)
    assert out.golden == ('click(id="note-n2")', 'click(id="pin")')


def test_planted_wrong_verifier_that_passes_initially_is_rejected() -> None:
    wrong = _draft(checks=(absent("notes", "notes", title="No such note"),))
    out = draft_to_task(wrong, make_world(2), 0, 5)
    assert isinstance(out, Rejection) and out.reason == "verifier_passes_initial_state"


def test_planted_golden_that_misses_the_goal_is_rejected() -> None:
    short = _draft(plan=(Open("notes"), ClickText("note-", "Door code")))  # never presses Pin
    out = draft_to_task(short, make_world(2), 0, 5)
    assert isinstance(out, Rejection) and out.reason == "golden_misses_goal"


def test_plan_that_does_not_fit_the_screens_is_rejected_with_the_reason() -> None:
    lost = _draft(plan=(Open("notes"), ClickText("note-", "Shopping for unicorns"), Click("pin")))
    out = draft_to_task(lost, make_world(2), 0, 5)
    assert isinstance(out, Rejection) and out.reason == "plan_does_not_fit_screens"
    assert "Shopping for unicorns" in out.detail
    typo = _draft(plan=(Open("notes"), ClickText("note-", "Door code"), Type("pin", "x")))
    out = draft_to_task(typo, make_world(2), 0, 5)
    assert isinstance(out, Rejection) and "not a field" in out.detail


def test_unknown_template_is_an_error_listing_the_valid_ones() -> None:
    with pytest.raises(TaskError, match="unknown template"):
        generate([0], ["no_such_template"])


def test_drafts_are_deterministic_per_world() -> None:
    a = [(d.template, d.instruction) for d in drafts_for(make_world(4))]
    b = [(d.template, d.instruction) for d in drafts_for(make_world(4))]
    assert a == b and len(a) > 30


# -- pools on disk --------------------------------------------------------------------------------------------------
def test_synthesised_pool_round_trips_and_a_bad_row_names_row_and_field(tmp_path: Path) -> None:
    tasks, _ = generate([1], ["mail_send", "x_mail_to_train"])
    path = tmp_path / "pool.parquet"
    TaskPool(tasks).save(path)
    back = TaskPool.load(path)
    assert [t.id for t in back] == [t.id for t in tasks]
    assert next(iter(back)).initial_state == tasks[0].initial_state
    rows = pq.read_table(path).to_pylist()
    rows[1]["verifier"] = "{not json"
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    with pytest.raises(TaskError, match=r"row 1: field 'verifier' is not valid JSON"):
        TaskPool.load(path)
    rows[1]["verifier"] = json.dumps(tasks[1].verifier)
    rows[0]["apps"] = ["mail", "no_such_app"]
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    with pytest.raises(TaskError, match=r"row 0: field 'apps' has unknown app"):
        TaskPool.load(path)
    assert set(APP_CLASSES) >= {a for t in tasks for a in t.apps}


def test_curriculum_template_reproduces_the_debug_curriculum() -> None:
    from maigym_ray.tasks.curriculum import curriculum_tasks

    synthesised, rejected = generate([0], ["curriculum"])
    assert not rejected
    hand = curriculum_tasks()
    assert [t.id for t in synthesised] == [t.id for t in hand]
    for a, b in zip(synthesised, hand, strict=True):
        # the planner, reading the screens, writes the same golden solution as the hand-built curriculum
        assert (a.instruction, a.golden, a.verifier, a.initial_state, a.split, a.max_steps, a.platforms) == (
            b.instruction,
            b.golden,
            b.verifier,
            b.initial_state,
            b.split,
            b.max_steps,
            b.platforms,
        )
