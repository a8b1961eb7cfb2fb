"""Unit tests for app specs: the loader's errors (file, JSON path, rule), seed generators, the SpecApp's action
effects and preconditions, the contacts port, and user spec files registered by path."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from maigym_ray.apps.app import Redirect, Request
from maigym_ray.apps.contacts import ContactsApp
from maigym_ray.apps.registry import APP_CLASSES, SPEC_APPS, make_apps
from maigym_ray.apps.spec.loader import BUILTIN_DIR, check_spec, load_spec
from maigym_ray.errors import AppError, ConfigError, SpecError

pytestmark = pytest.mark.unit

PHONEBOOK = json.loads((BUILTIN_DIR / "phonebook.json").read_text())


def _broken(edit: Any) -> dict[str, Any]:
    spec = copy.deepcopy(PHONEBOOK)
    edit(spec)
    return spec


@pytest.mark.parametrize(
    ("edit", "path", "rule"),
    [
        (lambda s: s.update(spec_version=2), "$.spec_version", "schema: 1 was expected"),
        (lambda s: s["actions"][1].update(kind="fly"), "$.actions[1].kind", "'fly' is not one of"),
        (lambda s: s["actions"][2].update(field="name"), "$.actions[2].field", "must be of type bool"),
        (
            lambda s: s["actions"][1].update(fields=["nickname"]),
            "$.actions[1].fields[0]",
            "no field 'nickname'",
        ),
        (lambda s: s["screens"][0].update(entity="people"), "$.screens[0].entity", "no entity 'people'"),
        (lambda s: s["screens"][1].update(id="contacts"), "$.screens[1].id", "duplicate screen id"),
        (lambda s: s["actions"][0].update(id="contacts"), "$.actions[0].id", "duplicate id"),
        (lambda s: s.update(screens=[s["screens"][1]]), "$.screens", "at least one list"),
        (lambda s: s["actions"][0].pop("fields"), "$.actions[0]", "'fields' is a required property"),
        (
            lambda s: s["entities"]["contacts"]["seed"]["records"][0].update(favorite="maybe"),
            "$.entities.contacts.seed.records[0].favorite",
            "",
        ),
        (
            lambda s: s["entities"]["contacts"]["seed"]["records"][0].update(age=3),
            "$.entities.contacts.seed.records[0]",
            "unknown field(s) ['age']",
        ),
    ],
)
def test_a_bad_spec_names_file_path_and_rule(edit: Any, path: str, rule: str) -> None:
    with pytest.raises(SpecError) as err:
        check_spec(_broken(edit), "my.json")
    assert (err.value.file, err.value.path) == ("my.json", path)
    assert rule in err.value.rule
    assert isinstance(err.value, ConfigError) and "my.json" in str(err.value) and path in str(err.value)


def test_unreadable_and_non_json_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"missing.json: at \$: cannot read"):
        load_spec(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SpecError, match="not JSON"):
        load_spec(tmp_path / "bad.json")


def test_generated_seeds_are_deterministic_and_typed() -> None:
    a, b = load_spec(BUILTIN_DIR / "rail.json"), load_spec(BUILTIN_DIR / "rail.json")
    seats = a["entities"]["seats"]["seed_records"]
    assert seats == b["entities"]["seats"]["seed_records"] and len(seats) == 12
    trains = {t["id"] for t in a["entities"]["trains"]["seed_records"]}
    assert [s["id"] for s in seats] == [f"s{i}" for i in range(1, 13)]
    assert all(
        s["train"] in trains and 29 <= s["price"] <= 139 and s["class"] in ("first", "second") for s in seats
    )


def test_the_contacts_port_behaves_like_contacts() -> None:
    hand, spec = ContactsApp(), APP_CLASSES["phonebook"]()
    assert hand.state() == spec.state()
    hand.favorite(Request(params={"id": "c2"}))
    spec.run(Request(params={"action": "favorite", "id": "c2"}))
    form = {"name": "Nina Park", "phone": "+49 1", "email": "nina@example.com", "company": "Park AG"}
    assert isinstance(hand.create(Request(form=form)), Redirect)
    assert spec.run(Request(params={"action": "new-contact"}, form=form)) == Redirect("/e/contacts/c6")
    hand.save(Request(params={"id": "c1"}, form={**form, "name": "Tom B."}))
    spec.run(Request(params={"action": "edit", "id": "c1"}, form={**form, "name": "Tom B."}))
    hand.delete(Request(params={"id": "c4"}))
    spec.run(Request(params={"action": "delete", "id": "c4"}))
    assert hand.state() == spec.state()
    # the list screens order records the same way (favourites first, then by name)
    order = re.findall(r'data-mg-id="contacts?-(c\d+)"', spec.home(Request()))
    assert order == re.findall(r'data-mg-id="contact-(c\d+)"', hand.list_contacts(Request()))
    # a required field left empty is an error on the form, and nothing changes
    before = spec.state()
    out = spec.run(Request(params={"action": "new-contact"}, form={"name": " "}))
    assert isinstance(out, str) and 'role="alert"' in out and "Name is required" in out
    assert spec.state() == before


def test_book_pay_and_preconditions() -> None:
    rail = APP_CLASSES["rail"]()
    free = next(s for s in rail.data["seats"] if not s["taken"])
    out = rail.run(
        Request(params={"action": "book-seat", "id": free["id"]}, form={"passenger": "Ada Lovelace"})
    )
    assert isinstance(out, Redirect)
    booking = rail.data["bookings"][-1]
    assert booking == {
        "id": "b2", "passenger": "Ada Lovelace", "seat": free["id"], "fare": free["price"], "status": "reserved"
    }  # fmt: skip
    assert free["taken"] is True
    # the seat is taken now: its button is gone and a direct post is refused on screen
    assert 'data-mg-id="book-seat"' not in rail.detail(Request(params={"entity": "seats", "id": free["id"]}))
    again = rail.run(Request(params={"action": "book-seat", "id": free["id"]}, form={"passenger": "X"}))
    assert isinstance(again, str) and "not possible now" in again and len(rail.data["bookings"]) == 2
    poor = min(rail.data["cards"], key=lambda c: c["balance"])
    rich = max(rail.data["cards"], key=lambda c: c["balance"])
    booking["fare"] = poor["balance"] + 1
    refused = rail.run(Request(params={"action": "pay-booking", "id": "b2"}, form={"account": poor["id"]}))
    assert isinstance(refused, str) and "Not enough balance" in refused and booking["status"] == "reserved"
    balance = rich["balance"]
    rail.run(Request(params={"action": "pay-booking", "id": "b2"}, form={"account": rich["id"]}))
    assert booking["status"] == "paid" and rich["balance"] == balance - booking["fare"]
    rail.reset()
    assert rail.state() == APP_CLASSES["rail"]().state()


def test_transfer_moves_an_amount_and_checks_it() -> None:
    transit = APP_CLASSES["transit"]()
    card, bank = transit.data["cards"]
    for bad, why in (("0", "above 0"), ("abc", "whole number"), (str(card["balance"] + 1), "Not enough")):
        out = transit.run(
            Request(params={"action": "top-up", "id": card["id"]}, form={"to": bank["id"], "amount": bad})
        )
        assert isinstance(out, str) and why in out
    total = card["balance"] + bank["balance"]
    transit.run(
        Request(params={"action": "top-up", "id": bank["id"]}, form={"to": card["id"], "amount": "20"})
    )
    assert card["balance"] == 26 and card["balance"] + bank["balance"] == total


def test_seeds_are_checked_against_field_types() -> None:
    board = APP_CLASSES["board"]()
    with pytest.raises(AppError, match=r"cards\[0\]\.column must be one of todo, doing, done"):
        board.seed({"cards": [{"id": "cd1", "title": "x", "column": "later"}]})
    board.seed({"cards": [{"id": "cd1", "title": "Only card", "column": "doing"}]})
    assert [c["title"] for c in board.state()["cards"]] == ["Only card"]


def test_spec_apps_are_registered_and_a_user_spec_file_loads_by_path(tmp_path: Path) -> None:
    assert {"phonebook", "rail", "market", "chat", "transit", "board"} <= set(SPEC_APPS) <= set(APP_CLASSES)
    mine = _broken(lambda s: s.update(name="mybook", title="My book"))
    (tmp_path / "mybook.json").write_text(json.dumps(mine))
    apps = make_apps([str(tmp_path / "mybook.json"), str(tmp_path / "mybook.json")])
    assert list(apps) == ["mybook"] and apps["mybook"].state() == ContactsApp().state()
    (tmp_path / "bad.json").write_text(json.dumps(_broken(lambda s: s.update(name="Bad Name"))))
    with pytest.raises(SpecError, match=r"bad.json: at \$.name"):
        make_apps([str(tmp_path / "bad.json")])


def test_the_docs_spec_is_the_example_and_it_loads() -> None:
    root = Path(__file__).resolve().parents[2]
    example = (root / "examples/spec_app/pantry.json").read_text()
    assert example.strip() in (root / "docs/app_specs.md").read_text()
    spec = load_spec(root / "examples/spec_app/pantry.json")
    assert [r["name"] for r in spec["entities"]["items"]["seed_records"]] == ["Oat milk", "Rice", "Peas"]
    tasks = [json.loads(line) for line in (root / "examples/spec_app/tasks.jsonl").read_text().splitlines()]
    assert {t["apps"][0] for t in tasks} == {"pantry"}


def test_shipped_spec_apps_are_distinct_and_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs/app_specs.md").read_text()
    new = [n for n in SPEC_APPS if n != "phonebook"]
    assert len(new) >= 37 and len(APP_CLASSES) >= 49
    titles = [APP_CLASSES[n].title for n in SPEC_APPS]
    assert len(set(titles)) == len(titles) == len(set(SPEC_APPS))
    for n in SPEC_APPS:
        assert f"| `{n}` |" in docs, n
        assert APP_CLASSES[n].SPEC["description"], n
