"""Unit tests for the Notes app (maigym_ray/apps/notes.py): screens, ids, validation and the state changes."""

from __future__ import annotations

import json
import re

import pytest

from maigym_ray.apps.app import Redirect, Request
from maigym_ray.apps.notes import NotesApp

pytestmark = pytest.mark.unit


def _ids(html: str) -> list[str]:
    return re.findall(r'data-mg-id="([^"]+)"', html)


def _note(app: NotesApp, nid: str) -> dict:
    return next(n for n in app.state()["notes"] if n["id"] == nid)


def test_seed_shape_and_schema() -> None:
    seed = NotesApp.default_seed()
    assert set(seed) == set(NotesApp.SCHEMA) == {"notes"}
    assert 5 <= len(seed["notes"]) <= 8
    for n in seed["notes"]:
        assert set(n) == {"id", "title", "body", "pinned", "updated"}
        assert re.fullmatch(r"n\d+", n["id"])
        assert re.fullmatch(r"2026-1[12]-\d\d", n["updated"])
    assert len({n["id"] for n in seed["notes"]}) == len(seed["notes"])
    assert NotesApp().state() == json.loads(json.dumps(seed))
    assert (NotesApp.name, NotesApp.title, NotesApp.icon) == ("notes", "Notes", "📝")


def test_list_pinned_first_then_newest_and_ids() -> None:
    app = NotesApp()
    html = app.list_notes(Request())
    ids = _ids(html)
    for want in ("search-box", "search", "new-note", "nav-notes", "home"):
        assert want in ids
    order = [i.removeprefix("note-") for i in ids if i.startswith("note-")]
    notes = {n["id"]: n for n in app.state()["notes"]}
    assert set(order) == set(notes)
    keys = [(not notes[i]["pinned"], notes[i]["updated"]) for i in order]
    pinned = [k for k in keys if not k[0]]
    assert keys[: len(pinned)] == pinned  # pinned first
    for group in (keys[: len(pinned)], keys[len(pinned) :]):
        assert [k[1] for k in group] == sorted((k[1] for k in group), reverse=True)
    assert order[0] == "n1"
    assert 'href="/notes/new"' in html


def test_search_matches_title_or_body_case_insensitively() -> None:
    app = NotesApp()
    html = app.list_notes(Request(query={"q": "SHOPPING"}))
    assert {i for i in _ids(html) if i.startswith("note-")} == {"note-n1", "note-n6"}
    html = app.list_notes(Request(query={"q": "azul"}))  # only in n4's body
    assert [i for i in _ids(html) if i.startswith("note-")] == ["note-n4"]
    assert 'value="azul"' in html
    html = app.list_notes(Request(query={"q": "zzz-nothing"}))
    assert not [i for i in _ids(html) if i.startswith("note-")]
    assert "No notes match." in html


def test_detail_screen_ids_and_dialog() -> None:
    app = NotesApp()
    html = app.note(Request(params={"id": "n2"}))
    ids = _ids(html)
    for want in ("edit", "pin", "delete", "delete-yes", "delete-no"):
        assert want in ids
    assert "Meeting notes 28 Nov" in html and "2026-11-28" in html
    assert ">Pin</button>" in html
    assert 'action="/notes/note/n2/delete"' in html
    assert 'href="/notes/note/n2/edit"' in html
    assert ">Unpin</button>" in app.note(Request(params={"id": "n1"}))


def test_unknown_note_is_key_error() -> None:
    app = NotesApp()
    for handler in (app.note, app.edit, app.pin, app.delete):
        with pytest.raises(KeyError):
            handler(Request(params={"id": "n999"}))
    with pytest.raises(KeyError):
        app.save(Request(params={"id": "n999"}, form={"title": "x"}))


def test_edit_form_and_save() -> None:
    app = NotesApp()
    html = app.edit(Request(params={"id": "n4"}))
    ids = _ids(html)
    assert {"title", "body", "save"} <= set(ids)
    assert '<label for="title">' in html and '<label for="body">' in html
    assert "<textarea" in html and "pottery class voucher" in html
    out = app.save(Request(params={"id": "n4"}, form={"title": " Gifts 2026 ", "body": "Mum: scarf"}))
    assert out == Redirect("/note/n4")
    n = _note(app, "n4")
    assert (n["title"], n["body"], n["updated"], n["pinned"]) == (
        "Gifts 2026",
        "Mum: scarf",
        "2026-12-01",
        False,
    )


def test_save_with_empty_title_is_an_error() -> None:
    app = NotesApp()
    before = app.state()
    html = app.save(Request(params={"id": "n4"}, form={"title": "  ", "body": "changed"}))
    assert isinstance(html, str)
    assert 'role="alert"' in html and "A title is required." in html
    assert "changed" in html  # the typed text is kept
    assert app.state() == before


def test_pin_toggles() -> None:
    app = NotesApp()
    assert app.pin(Request(params={"id": "n3"})) == Redirect("/note/n3")
    assert _note(app, "n3")["pinned"] is True
    app.pin(Request(params={"id": "n3"}))
    assert _note(app, "n3")["pinned"] is False


def test_delete_removes_the_note() -> None:
    app = NotesApp()
    assert app.delete(Request(params={"id": "n6"})) == Redirect("/")
    assert "n6" not in {n["id"] for n in app.state()["notes"]}
    assert "note-n6" not in _ids(app.list_notes(Request()))


def test_new_form_and_create_errors() -> None:
    app = NotesApp()
    html = app.new(Request())
    assert {"title", "body", "create"} <= set(_ids(html))
    assert 'action="/notes/create"' in html
    before = app.state()
    html = app.create(Request(form={"title": "", "body": "orphan text"}))
    assert isinstance(html, str) and 'role="alert"' in html and "orphan text" in html
    assert app.state() == before


def test_create_after_delete_never_reuses_an_id() -> None:
    app = NotesApp()
    app.delete(Request(params={"id": "n2"}))
    out = app.create(Request(form={"title": "Fresh"}))
    ids = [n["id"] for n in app.state()["notes"]]
    assert len(ids) == len(set(ids))
    assert out == Redirect("/note/n7")


def test_reset_restores_the_seed() -> None:
    app = NotesApp()
    seeded = app.state()
    app.pin(Request(params={"id": "n2"}))
    app.delete(Request(params={"id": "n1"}))
    app.create(Request(form={"title": "Temp"}))
    assert app.state() != seeded
    app.reset()
    assert app.state() == seeded == json.loads(json.dumps(NotesApp.default_seed()))


def test_happy_path_create_edit_pin_delete() -> None:
    app = NotesApp()
    count = len(app.state()["notes"])
    out = app.create(Request(form={"title": "Call the plumber", "body": "Leaking tap in the kitchen"}))
    assert out == Redirect(f"/note/n{count + 1}")
    nid = out.path.rsplit("/", 1)[1]
    assert _note(app, nid) == {
        "id": nid,
        "title": "Call the plumber",
        "body": "Leaking tap in the kitchen",
        "pinned": False,
        "updated": "2026-12-01",
    }
    assert "Leaking tap in the kitchen" in app.note(Request(params={"id": nid}))
    app.save(Request(params={"id": nid}, form={"title": "Call the plumber", "body": "Tap fixed on Friday"}))
    app.pin(Request(params={"id": nid}))
    html = app.list_notes(Request())
    assert _note(app, nid)["body"] == "Tap fixed on Friday"
    assert f"note-{nid}" in _ids(html)
    assert html.index(f"note-{nid}") < html.index("note-n4")  # pinned notes come first
    app.delete(Request(params={"id": nid}))
    assert len(app.state()["notes"]) == count
