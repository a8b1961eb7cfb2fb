"""Unit tests for the Greenhouse plants app: schedule list, badges, water, fertilise, schedule, add, delete."""

from __future__ import annotations

import json
import re

import pytest

from maigym_ray.apps.app import Redirect, Request
from maigym_ray.apps.plants import PlantsApp, badge, next_watering

pytestmark = pytest.mark.unit


def _ids(html: str) -> list[str]:
    return re.findall(r'data-mg-id="([^"]+)"', html)


def _plant(app: PlantsApp, pid: str) -> dict:
    p = app.find(app.data["plants"], "id", pid)
    assert p is not None
    return p


def test_default_seed_matches_schema_and_contract() -> None:
    seed = PlantsApp.default_seed()
    assert set(seed) == set(PlantsApp.SCHEMA) == {"plants", "log"}
    app = PlantsApp()
    assert app.state() == json.loads(json.dumps(seed))
    assert 5 <= len(seed["plants"]) <= 8 and 5 <= len(seed["log"]) <= 8
    for p in seed["plants"]:
        assert set(p) == {"id", "name", "species", "room", "every_days", "last_watered"}
    for w in seed["log"]:
        assert set(w) == {"id", "plant", "date", "action"} and w["action"] in ("watered", "fertilised")
        assert app.find(seed["plants"], "id", w["plant"]) is not None
    assert [r.path for r in app.routes()] == [
        "/", "/plant/{id}", "/plant/{id}/water", "/plant/{id}/fertilise", "/plant/{id}/schedule",
        "/plant/{id}/delete", "/new", "/create",
    ]  # fmt: skip


def test_next_watering_and_badges() -> None:
    p = {"last_watered": "2026-11-24", "every_days": 7}
    assert next_watering(p) == "2026-12-01" and badge(p) == "due"
    assert badge({"last_watered": "2026-11-24", "every_days": 6}) == "overdue"
    assert badge({"last_watered": "2026-11-24", "every_days": 8}) == ""
    assert next_watering({"last_watered": "2026-12-30", "every_days": 3}) == "2027-01-02"


def test_list_sorted_by_next_watering_with_badges() -> None:
    html = PlantsApp().list_plants(Request())
    ids = _ids(html)
    assert "new-plant" in ids and 'href="/plants/new"' in html
    assert [i for i in ids if i.startswith("plant-")] == [
        "plant-pl3", "plant-pl5", "plant-pl1", "plant-pl4", "plant-pl2", "plant-pl6", "plant-pl7"
    ]  # fmt: skip
    assert html.count(">overdue<") == 2 and html.count(">due<") == 1


def test_plant_detail_ids_and_log() -> None:
    html = PlantsApp().plant(Request(params={"id": "pl1"}))
    assert {"water", "fertilise", "every-days", "save-schedule", "delete", "delete-yes", "delete-no"} <= set(
        _ids(html)
    )
    assert "Monstera deliciosa" in html and "Living room" in html and "2026-11-24" in html
    assert "fertilised" in html and 'for="every-days"' in html and 'value="7"' in html
    assert 'action="/plants/plant/pl1/delete"' in html


def test_water_and_fertilise_log_today() -> None:
    app = PlantsApp()
    assert app.water(Request(params={"id": "pl3"})) == Redirect("/plant/pl3")
    assert _plant(app, "pl3")["last_watered"] == "2026-12-01"
    assert app.data["log"][-1] == {"id": "w9", "plant": "pl3", "date": "2026-12-01", "action": "watered"}
    assert app.fertilise(Request(params={"id": "pl3"})) == Redirect("/plant/pl3")
    assert app.data["log"][-1] == {"id": "w10", "plant": "pl3", "date": "2026-12-01", "action": "fertilised"}
    assert _plant(app, "pl3")["last_watered"] == "2026-12-01"
    list_html = app.list_plants(Request())
    assert [i for i in _ids(list_html) if i.startswith("plant-")][-1] == "plant-pl3"


def test_schedule_saves_and_validates() -> None:
    app = PlantsApp()
    assert app.schedule(Request(params={"id": "pl4"}, form={"every_days": "4"})) == Redirect("/plant/pl4")
    assert _plant(app, "pl4")["every_days"] == 4
    before = app.state()
    for bad in ("0", "61", "abc", "", "2.5", "-3", "²"):
        out = app.schedule(Request(params={"id": "pl4"}, form={"every_days": bad}))
        assert isinstance(out, str) and 'role="alert"' in out and "1 to 60" in out, bad
    assert app.state() == before


def test_delete_removes_plant_and_its_log() -> None:
    app = PlantsApp()
    assert app.delete(Request(params={"id": "pl1"})) == Redirect("/")
    assert app.find(app.data["plants"], "id", "pl1") is None
    assert all(w["plant"] != "pl1" for w in app.data["log"]) and len(app.data["log"]) == 6
    assert "plant-pl1" not in _ids(app.list_plants(Request()))
    # ids stay unique after a delete shrinks the collections
    app.water(Request(params={"id": "pl2"}))
    app.create(Request(form={"name": "Fern", "every_days": "3"}))
    assert len({w["id"] for w in app.data["log"]}) == len(app.data["log"])
    assert len({p["id"] for p in app.data["plants"]}) == len(app.data["plants"])


def test_new_form_and_create_flow() -> None:
    app = PlantsApp()
    html = app.new(Request())
    assert {"name", "species", "room", "every-days", "create"} <= set(_ids(html))
    assert all(f'for="{k}"' in html for k in ("name", "species", "room", "every-days"))
    form = {"name": "Boston fern", "species": "Nephrolepis exaltata", "room": "Bathroom", "every_days": "3"}
    assert app.create(Request(form=form)) == Redirect("/plant/pl8")
    assert app.data["plants"][-1] == {
        "id": "pl8",
        "name": "Boston fern",
        "species": "Nephrolepis exaltata",
        "room": "Bathroom",
        "every_days": 3,
        "last_watered": "2026-12-01",
    }
    assert "Boston fern" in app.plant(Request(params={"id": "pl8"}))


@pytest.mark.parametrize(
    ("form", "needle"),
    [
        ({"name": " ", "every_days": "7"}, "name is required"),
        ({"name": "Cactus", "every_days": "90"}, "1 to 60"),
        ({"name": "Cactus", "every_days": "weekly"}, "1 to 60"),
    ],
)
def test_create_errors_rerender_form(form: dict[str, str], needle: str) -> None:
    app = PlantsApp()
    before = app.state()
    out = app.create(Request(form=form))
    assert isinstance(out, str) and 'role="alert"' in out and needle in out and "create" in _ids(out)
    assert app.state() == before


def test_unknown_ids_raise_key_error() -> None:
    app = PlantsApp()
    for handler in (app.plant, app.water, app.fertilise, app.schedule, app.delete):
        with pytest.raises(KeyError):
            handler(Request(params={"id": "pl99"}, form={"every_days": "3"}))


def test_reset_restores_seed() -> None:
    app = PlantsApp()
    seed = app.state()
    app.water(Request(params={"id": "pl1"}))
    app.delete(Request(params={"id": "pl2"}))
    app.create(Request(form={"name": "Ivy", "every_days": "5"}))
    assert app.state() != seed
    app.reset()
    assert app.state() == seed
