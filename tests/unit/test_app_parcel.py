"""Unit tests for the Parcels app (maigym_ray/apps/parcel.py): screens, ids, validation and the state changes."""

from __future__ import annotations

import json
import re

import pytest

from maigym_ray.apps.app import Redirect, Request
from maigym_ray.apps.parcel import ParcelApp

pytestmark = pytest.mark.unit

FORM_IDS = ("eta", "save-eta", "locker-L1", "send-to-locker", "note", "save-note")


def _ids(html: str) -> list[str]:
    return re.findall(r'data-mg-id="([^"]+)"', html)


def _parcel(app: ParcelApp, pid: str) -> dict:
    return next(p for p in app.state()["parcels"] if p["id"] == pid)


def test_seed_shape_and_schema() -> None:
    seed = ParcelApp.default_seed()
    assert set(seed) == set(ParcelApp.SCHEMA) == {"parcels", "lockers"}
    assert 5 <= len(seed["parcels"]) <= 8 and 5 <= len(seed["lockers"]) <= 8
    locker_ids = {lk["id"] for lk in seed["lockers"]}
    for p in seed["parcels"]:
        assert set(p) == {"id", "tracking", "sender", "status", "eta", "locker", "note"}
        assert re.fullmatch(r"P\d+", p["id"]) and re.fullmatch(r"PK\d{8}", p["tracking"])
        assert p["status"] in ("in transit", "out for delivery", "delivered")
        assert re.fullmatch(r"2026-1[12]-\d\d", p["eta"])
        assert p["locker"] == "" or p["locker"] in locker_ids
    for lk in seed["lockers"]:
        assert set(lk) == {"id", "name", "address"} and re.fullmatch(r"L\d+", lk["id"])
    assert ParcelApp().state() == json.loads(json.dumps(seed))
    assert (ParcelApp.name, ParcelApp.title, ParcelApp.icon) == ("parcel", "Parcels", "📦")


def test_list_shows_every_parcel_with_sender_status_eta() -> None:
    app = ParcelApp()
    html = app.list_parcels(Request())
    ids = _ids(html)
    assert {"search-box", "search", "home"} <= set(ids)
    assert {i for i in ids if i.startswith("parcel-")} == {f"parcel-{p['id']}" for p in app.data["parcels"]}
    for p in app.data["parcels"]:
        for text in (p["sender"], p["status"], p["eta"]):
            assert text in html


def test_search_by_tracking_or_sender() -> None:
    app = ParcelApp()
    html = app.list_parcels(Request(query={"q": "pk48213907"}))
    assert [i for i in _ids(html) if i.startswith("parcel-")] == ["parcel-P1"]
    html = app.list_parcels(Request(query={"q": "nordwind"}))
    assert {i for i in _ids(html) if i.startswith("parcel-")} == {"parcel-P1", "parcel-P2"}
    html = app.list_parcels(Request(query={"q": "nothing-like-this"}))
    assert "No parcels match." in html and not [i for i in _ids(html) if i.startswith("parcel-")]


def test_detail_of_open_parcel_has_three_forms() -> None:
    app = ParcelApp()
    html = app.parcel(Request(params={"id": "P1"}))
    ids = _ids(html)
    for want in FORM_IDS:
        assert want in ids
    for label in ("eta", "note"):
        assert f'<label for="{label}">' in html
    for lk in app.data["lockers"]:  # one radio button per locker
        assert f'value="{lk["id"]}" data-mg-id="locker-{lk["id"]}"' in html and lk["name"] in html
    for action in ("eta", "locker", "note"):
        assert f'action="/parcel/parcel/P1/{action}"' in html
    assert "PK48213907" in html and "Nordwind Books" in html


def test_delivered_parcel_shows_no_forms() -> None:
    app = ParcelApp()
    html = app.parcel(Request(params={"id": "P5"}))
    assert not set(FORM_IDS) & set(_ids(html))
    assert "<form" not in html
    assert "PK31984025" in html and "delivered" in html


def test_delivered_parcel_rejects_posts() -> None:
    app = ParcelApp()
    before = app.state()
    for handler, form in (
        (app.set_eta, {"eta": "2026-12-09"}),
        (app.set_locker, {"locker": "L3"}),
        (app.set_note, {"note": "hi"}),
    ):
        out = handler(Request(params={"id": "P5"}, form=form))
        assert isinstance(out, str) and 'role="alert"' in out
    assert app.state() == before


def test_unknown_parcel_is_key_error() -> None:
    app = ParcelApp()
    with pytest.raises(KeyError):
        app.parcel(Request(params={"id": "P999"}))
    for handler in (app.set_eta, app.set_locker, app.set_note):
        with pytest.raises(KeyError):
            handler(Request(params={"id": "P999"}, form={}))


@pytest.mark.parametrize(
    "bad", ["", "tomorrow", "2026-12-1", "2026-13-01", "2026-02-30", "20261205", "2026-12-01"]
)
def test_reschedule_rejects_bad_or_early_dates(bad: str) -> None:
    app = ParcelApp()
    before = app.state()
    html = app.set_eta(Request(params={"id": "P1"}, form={"eta": bad}))
    assert isinstance(html, str) and 'role="alert"' in html
    assert {"eta", "save-eta"} <= set(_ids(html))
    assert app.state() == before


def test_reschedule_accepts_tomorrow_and_later() -> None:
    app = ParcelApp()
    assert app.set_eta(Request(params={"id": "P1"}, form={"eta": "2026-12-02"})) == Redirect("/parcel/P1")
    assert _parcel(app, "P1")["eta"] == "2026-12-02"
    app.set_eta(Request(params={"id": "P3"}, form={"eta": " 2027-01-10 "}))
    assert _parcel(app, "P3")["eta"] == "2027-01-10"


def test_send_to_locker() -> None:
    app = ParcelApp()
    assert app.set_locker(Request(params={"id": "P2"}, form={"locker": "L3"})) == Redirect("/parcel/P2")
    assert _parcel(app, "P2")["locker"] == "L3"
    html = app.parcel(Request(params={"id": "P2"}))
    assert "Locker Riverside Mall" in html and 'data-mg-id="locker-L3" checked>' in html
    before = app.state()
    for bad in ("", "L99", "Locker Central Station"):
        out = app.set_locker(Request(params={"id": "P2"}, form={"locker": bad}))
        assert isinstance(out, str) and 'role="alert"' in out
    assert app.state() == before


def test_courier_note_length_limit() -> None:
    app = ParcelApp()
    ok = "x" * 120
    assert app.set_note(Request(params={"id": "P6"}, form={"note": ok})) == Redirect("/parcel/P6")
    assert _parcel(app, "P6")["note"] == ok
    before = app.state()
    html = app.set_note(Request(params={"id": "P6"}, form={"note": "y" * 121}))
    assert isinstance(html, str) and 'role="alert"' in html and "120" in html
    assert app.state() == before
    app.set_note(Request(params={"id": "P3"}, form={"note": ""}))  # an empty note clears it
    assert _parcel(app, "P3")["note"] == ""


def test_reset_restores_the_seed() -> None:
    app = ParcelApp()
    seeded = app.state()
    app.set_eta(Request(params={"id": "P1"}, form={"eta": "2026-12-10"}))
    app.set_locker(Request(params={"id": "P1"}, form={"locker": "L1"}))
    assert app.state() != seeded
    app.reset()
    assert app.state() == seeded == json.loads(json.dumps(ParcelApp.default_seed()))


def test_happy_path_find_reschedule_redirect_and_note() -> None:
    app = ParcelApp()
    html = app.list_parcels(Request(query={"q": "Pharma"}))
    assert [i for i in _ids(html) if i.startswith("parcel-")] == ["parcel-P6"]
    app.set_eta(Request(params={"id": "P6"}, form={"eta": "2026-12-08"}))
    app.set_locker(Request(params={"id": "P6"}, form={"locker": "L5"}))
    app.set_note(Request(params={"id": "P6"}, form={"note": "Fragile: medicine, keep upright"}))
    assert _parcel(app, "P6") == {
        "id": "P6",
        "tracking": "PK77340561",
        "sender": "Pharma Direct",
        "status": "in transit",
        "eta": "2026-12-08",
        "locker": "L5",
        "note": "Fragile: medicine, keep upright",
    }
    others = [p for p in app.state()["parcels"] if p["id"] != "P6"]
    assert others == [p for p in ParcelApp.default_seed()["parcels"] if p["id"] != "P6"]
    html = app.parcel(Request(params={"id": "P6"}))
    assert "2026-12-08" in html and "Locker Oak Street" in html and "keep upright" in html
