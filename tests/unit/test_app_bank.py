"""Unit tests for the Wallet bank app (maigym_ray/apps/bank.py): screens, validation, transfer flow, payees."""

from __future__ import annotations

import re

import pytest

from maigym_ray.apps.app import Handler, Redirect, Request
from maigym_ray.apps.bank import BankApp

pytestmark = pytest.mark.unit


def _ids(html: str) -> set[str]:
    return set(re.findall(r'data-mg-id="([^"]+)"', html))


def _get(app: BankApp, method: str, path: str) -> Handler:
    return next(r.handler for r in app.routes() if r.method == method and r.path == path)


def test_seed_schema_and_records() -> None:
    app = BankApp()
    seed = BankApp.default_seed()
    assert set(seed) == set(BankApp.SCHEMA)
    assert 5 <= len(seed["payees"]) <= 8 and 5 <= len(seed["transactions"]) <= 8
    assert all(set(p) == {"id", "name", "iban"} for p in seed["payees"])
    assert all(set(t) == {"id", "date", "counterparty", "amount", "reference"} for t in seed["transactions"])
    assert app.state() == seed


def test_routes_are_the_contract() -> None:
    got = {(r.method, r.path) for r in BankApp().routes()}
    assert got == {
        ("GET", "/"),
        ("GET", "/tx/{id}"),
        ("GET", "/transfer"),
        ("POST", "/transfer/review"),
        ("POST", "/transfer/confirm"),
        ("GET", "/payees"),
        ("GET", "/payees/new"),
        ("POST", "/payees/create"),
    }


def test_overview_shows_balance_and_newest_first() -> None:
    app = BankApp()
    html = app.overview(Request())
    assert "€2450.75" in html
    assert {"search-box", "search", "transfer", "payees"} <= _ids(html)
    order = re.findall(r'data-mg-id="tx-(t\d+)"', html)
    assert order == ["t7", "t6", "t5", "t4", "t3", "t2", "t1"]


def test_search_by_counterparty_or_reference() -> None:
    app = BankApp()
    html = app.overview(Request(query={"q": "anna"}))
    assert _ids(html) & {f"tx-t{i}" for i in range(1, 8)} == {"tx-t4", "tx-t5"}
    html = app.overview(Request(query={"q": "RENT"}))
    assert "tx-t1" in _ids(html) and "tx-t2" not in _ids(html)
    assert "No transactions match." in app.overview(Request(query={"q": "zzz"}))


def test_tx_detail_and_unknown_id() -> None:
    app = BankApp()
    html = app.tx(Request(params={"id": "t3"}))
    assert "Stadtwerke Berlin" in html and "-€84.30" in html and "Electricity 11/2026" in html
    assert "repeat" in _ids(html)
    with pytest.raises(KeyError):
        app.tx(Request(params={"id": "t999"}))


def test_transfer_form_and_preselect() -> None:
    app = BankApp()
    html = app.transfer(Request())
    # Payees are radio buttons (one click picks one, in a browser and on a phone alike), not a <select>.
    assert {"payee-p1", "payee-p2", "amount", "reference", "review"} <= _ids(html)
    assert '<label for="amount">' in html and '<label for="reference">' in html
    assert 'value="p2" data-mg-id="payee-p2">Anna Schmitt' in html
    assert "checked" not in html
    html = app.transfer(Request(query={"payee": "p2"}))
    assert 'value="p2" data-mg-id="payee-p2" checked>Anna Schmitt' in html
    assert 'value="p1" data-mg-id="payee-p1">Anna Schmidt' in html


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"payee": "", "amount": "10"}, "Choose a payee."),
        ({"payee": "p99", "amount": "10"}, "Choose a payee."),
        ({"payee": "p1", "amount": ""}, "positive amount"),
        ({"payee": "p1", "amount": "abc"}, "positive amount"),
        ({"payee": "p1", "amount": "0"}, "positive amount"),
        ({"payee": "p1", "amount": "-5"}, "positive amount"),
        ({"payee": "p1", "amount": "10.123"}, "positive amount"),
        ({"payee": "p1", "amount": "1e3"}, "positive amount"),
        ({"payee": "p1", "amount": "2450.76"}, "Insufficient funds"),
    ],
)
def test_review_rejects_bad_input(form: dict[str, str], message: str) -> None:
    app = BankApp()
    before = app.state()
    for handler in (app.review, app.confirm):
        html = handler(Request(form={**form, "reference": "x"}))
        assert isinstance(html, str)
        assert 'role="alert"' in html and message in html
        assert {"payee-p1", "amount", "review"} <= _ids(html)
    assert app.state() == before


def test_review_page_has_hidden_fields_confirm_and_back() -> None:
    app = BankApp()
    html = app.review(Request(form={"payee": "p5", "amount": " 40.5 ", "reference": "Dinner"}))
    assert isinstance(html, str)
    assert {"confirm", "back"} <= _ids(html)
    assert 'action="/bank/transfer/confirm"' in html
    assert '<input type="hidden" name="payee" value="p5">' in html
    assert '<input type="hidden" name="amount" value="40.50">' in html
    assert '<input type="hidden" name="reference" value="Dinner">' in html
    assert 'href="/bank/transfer?payee=p5"' in html
    assert "Jonas Weber" in html and "€40.50" in html


def test_full_transfer_flow() -> None:
    app = BankApp()
    _get(app, "GET", "/transfer")(Request(query={"payee": "p1"}))
    review = app.review(Request(form={"payee": "p1", "amount": "100.25", "reference": "Rent share"}))
    assert "confirm" in _ids(review)
    out = app.confirm(Request(form={"payee": "p1", "amount": "100.25", "reference": "Rent share"}))
    assert out == Redirect("/tx/t8")
    state = app.state()
    assert state["balance"] == 2350.5
    assert state["transactions"][-1] == {
        "id": "t8",
        "date": "2026-12-01",
        "counterparty": "Anna Schmidt",
        "amount": -100.25,
        "reference": "Rent share",
    }
    assert re.findall(r'data-mg-id="tx-(t\d+)"', app.overview(Request()))[0] == "t8"
    assert "€2350.50" in app.overview(Request())
    # the whole balance can be sent, to the cent, and then nothing more
    out = app.confirm(Request(form={"payee": "p3", "amount": "2350.50", "reference": ""}))
    assert out == Redirect("/tx/t9") and app.state()["balance"] == 0.0
    assert "Insufficient funds" in app.review(Request(form={"payee": "p3", "amount": "0.01"}))


def test_payees_list_and_create() -> None:
    app = BankApp()
    html = app.payees(Request())
    assert {f"payee-p{i}" for i in range(1, 7)} | {"new-payee"} <= _ids(html)
    assert 'href="/bank/transfer?payee=p3"' in html
    form = app.new_payee(Request())
    assert {"name", "iban", "add-payee"} <= _ids(form)
    out = app.create_payee(Request(form={"name": " Lena Vogel ", "iban": "DE27100777770209299700"}))
    assert out == Redirect("/payees")
    assert app.state()["payees"][-1] == {"id": "p7", "name": "Lena Vogel", "iban": "DE27100777770209299700"}
    assert "payee-p7" in _ids(app.payees(Request()))
    assert 'data-mg-id="payee-p7">Lena Vogel' in app.transfer(Request())


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"name": "", "iban": "DE27100777770209299700"}, "name is required"),
        ({"name": "   ", "iban": "DE27100777770209299700"}, "name is required"),
        ({"name": "Lena Vogel", "iban": "DE2710077777"}, "at least 15 characters"),
        ({"name": "Lena Vogel"}, "at least 15 characters"),
    ],
)
def test_create_payee_rejects_bad_input(form: dict[str, str], message: str) -> None:
    app = BankApp()
    before = app.state()
    html = app.create_payee(Request(form=form))
    assert isinstance(html, str) and message in html and 'role="alert"' in html
    assert {"name", "iban", "add-payee"} <= _ids(html)
    assert app.state() == before


def test_reset_restores_the_seed() -> None:
    app = BankApp()
    app.confirm(Request(form={"payee": "p2", "amount": "12", "reference": "Lunch"}))
    app.create_payee(Request(form={"name": "X Y", "iban": "DE27100777770209299700"}))
    assert app.state() != BankApp.default_seed()
    app.reset()
    assert app.state() == BankApp.default_seed()
