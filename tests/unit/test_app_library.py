"""Unit tests for the Shelf library app (maigym_ray/apps/library.py): catalogue, borrow, hold, renew, return."""

from __future__ import annotations

import re

import pytest

from maigym_ray.apps.app import Redirect, Request
from maigym_ray.apps.library import LibraryApp

pytestmark = pytest.mark.unit


def _ids(html: str) -> set[str]:
    return set(re.findall(r'data-mg-id="([^"]+)"', html))


def _p(rid: str) -> Request:
    return Request(params={"id": rid})


def test_seed_schema_and_records() -> None:
    seed = LibraryApp.default_seed()
    assert set(seed) == set(LibraryApp.SCHEMA)
    for key in ("books", "loans", "holds"):
        assert 5 <= len(seed[key]) <= 8
    assert all(set(b) == {"id", "title", "author", "year", "copies"} for b in seed["books"])
    assert all(set(x) == {"id", "book", "title", "due", "renewals", "status"} for x in seed["loans"])
    assert all(set(h) == {"id", "book", "title", "status"} for h in seed["holds"])
    assert LibraryApp().state() == seed


def test_routes_include_the_contract() -> None:
    got = {(r.method, r.path) for r in LibraryApp().routes()}
    assert {
        ("GET", "/"),
        ("GET", "/book/{id}"),
        ("POST", "/book/{id}/borrow"),
        ("POST", "/book/{id}/hold"),
        ("GET", "/loans"),
        ("GET", "/loan/{id}"),
        ("POST", "/loan/{id}/renew"),
        ("POST", "/loan/{id}/return"),
    } <= got


def test_catalogue_and_search() -> None:
    app = LibraryApp()
    html = app.catalogue(Request())
    assert {"search-box", "search", "loans"} <= _ids(html)
    assert {f"book-b{i}" for i in range(1, 9)} <= _ids(html)
    by_author = _ids(app.catalogue(Request(query={"q": "le guin"})))
    assert {i for i in by_author if i.startswith("book-")} == {"book-b1", "book-b2"}
    by_title = _ids(app.catalogue(Request(query={"q": "MARTIAN"})))
    assert {i for i in by_title if i.startswith("book-")} == {"book-b4"}
    assert "No books match." in app.catalogue(Request(query={"q": "zzz"}))


def test_book_detail_shows_borrow_or_hold() -> None:
    app = LibraryApp()
    available = _ids(app.book(_p("b7")))
    assert "borrow" in available and "hold" not in available
    out = _ids(app.book(_p("b2")))
    assert "hold" in out and "borrow" not in out
    with pytest.raises(KeyError):
        app.book(_p("b999"))


def test_borrow_creates_loan_and_takes_a_copy() -> None:
    app = LibraryApp()
    assert app.borrow(_p("b7")) == Redirect("/loans")
    state = app.state()
    assert state["loans"][-1] == {
        "id": "L6",
        "book": "b7",
        "title": "Sapiens",
        "due": "2026-12-22",
        "renewals": 0,
        "status": "active",
    }
    assert LibraryApp.find(state["books"], "id", "b7")["copies"] == 3
    html = app.loans(Request())
    assert "loan-L6" in _ids(html) and "2026-12-22" in html


def test_borrow_errors_keep_state() -> None:
    app = LibraryApp()
    before = app.state()
    html = app.borrow(_p("b6"))  # L1 is an active loan of b6
    assert isinstance(html, str) and "already have this book on loan" in html and 'role="alert"' in html
    assert "borrow" in _ids(html)
    html = app.borrow(_p("b5"))  # no copies left
    assert isinstance(html, str) and "No copies are available" in html
    assert app.state() == before
    with pytest.raises(KeyError):
        app.borrow(_p("b999"))


def test_hold_and_cancel_hold() -> None:
    app = LibraryApp()
    assert app.hold(_p("b2")) == Redirect("/loans")
    assert app.state()["holds"][-1] == {
        "id": "H6",
        "book": "b2",
        "title": "The Dispossessed",
        "status": "waiting",
    }
    html = app.loans(Request())
    assert "The Dispossessed" in html and {"cancel-H6", "cancel-H6-yes", "cancel-H1"} <= _ids(html)
    dup = app.hold(_p("b2"))
    assert isinstance(dup, str) and "already have a hold" in dup and len(app.state()["holds"]) == 6
    assert app.cancel_hold(_p("H6")) == Redirect("/loans")
    assert app.state()["holds"][-1]["status"] == "cancelled"
    assert "cancel-H6" not in _ids(app.loans(Request()))
    with pytest.raises(KeyError):
        app.cancel_hold(_p("H99"))


def test_loans_lists_active_loans_and_waiting_holds_only() -> None:
    html = LibraryApp().loans(Request())
    assert {"loan-L1", "loan-L2", "loan-L3"} <= _ids(html)
    assert not {"loan-L4", "loan-L5"} & _ids(html)
    assert "2026-12-08" in html and "Klara and the Sun" in html
    assert "cancel-H2" not in _ids(html)


def test_loan_detail_renew_until_limit() -> None:
    app = LibraryApp()
    html = app.loan(_p("L1"))
    assert {"renew", "return", "return-yes", "return-no"} <= _ids(html)
    assert app.renew(_p("L1")) == Redirect("/loan/L1?renewed=1")
    assert app.state()["loans"][0]["due"] == "2026-12-22" and app.state()["loans"][0]["renewals"] == 1
    assert "new due date is 2026-12-22" in app.loan(Request(params={"id": "L1"}, query={"renewed": "1"}))
    assert app.renew(_p("L1")) == Redirect("/loan/L1?renewed=1")
    assert app.state()["loans"][0]["due"] == "2027-01-05" and app.state()["loans"][0]["renewals"] == 2
    before = app.state()
    third = app.renew(_p("L1"))
    assert isinstance(third, str) and "already been renewed 2 times" in third and 'role="alert"' in third
    assert app.state() == before
    with pytest.raises(KeyError):
        app.loan(_p("L99"))


def test_return_flow_puts_copy_back() -> None:
    app = LibraryApp()
    assert app.return_loan(_p("L3")) == Redirect("/loans")
    state = app.state()
    assert LibraryApp.find(state["loans"], "id", "L3")["status"] == "returned"
    assert LibraryApp.find(state["books"], "id", "b8")["copies"] == 2
    assert "loan-L3" not in _ids(app.loans(Request()))
    returned = _ids(app.loan(_p("L3")))
    assert "renew" not in returned and "return" not in returned
    app.return_loan(_p("L3"))  # a second return changes nothing
    assert app.state() == state
    renew = app.renew(_p("L3"))
    assert isinstance(renew, str) and "already been returned" in renew


def test_full_flow_hold_then_borrow_after_return() -> None:
    app = LibraryApp()
    app.borrow(_p("b4"))  # the last copy of The Martian
    assert "hold" in _ids(app.book(_p("b4")))
    app.return_loan(_p("L6"))
    assert "borrow" in _ids(app.book(_p("b4")))
    app.borrow(_p("b4"))
    assert [x["id"] for x in app.state()["loans"] if x["status"] == "active"] == ["L1", "L2", "L3", "L7"]


def test_reset_restores_the_seed() -> None:
    app = LibraryApp()
    app.borrow(_p("b1"))
    app.hold(_p("b2"))
    app.renew(_p("L2"))
    app.return_loan(_p("L1"))
    assert app.state() != LibraryApp.default_seed()
    app.reset()
    assert app.state() == LibraryApp.default_seed()
