"""Unit tests for the Stays hotel app: search, results, detail, booking, cancel, errors and reset."""

from __future__ import annotations

import json
import re

import pytest

from maigym_ray.apps.app import Redirect, Request
from maigym_ray.apps.hotel import HotelApp, stay_nights

pytestmark = pytest.mark.unit


def _ids(html: str) -> list[str]:
    return re.findall(r'data-mg-id="([^"]+)"', html)


def _get(app: HotelApp, path: str, req: Request) -> str:
    route = next(r for r in app.routes() if r.path == path and r.method == "GET")
    out = route.handler(req)
    assert isinstance(out, str)
    return out


def _hotel(app: HotelApp, hid: str) -> dict:
    h = app.find(app.data["hotels"], "id", hid)
    assert h is not None
    return h


def test_default_seed_matches_schema_and_contract() -> None:
    seed = HotelApp.default_seed()
    assert set(seed) == set(HotelApp.SCHEMA) == {"guest", "hotels", "bookings"}
    app = HotelApp()
    assert app.state() == json.loads(json.dumps(seed))
    assert 5 <= len(seed["hotels"]) <= 8 and 5 <= len(seed["bookings"]) <= 8
    for h in seed["hotels"]:
        assert set(h) == {"id", "name", "city", "price", "rating", "rooms"}
    for b in seed["bookings"]:
        assert set(b) == {
            "id", "hotel", "hotel_name", "city", "check_in", "check_out", "nights", "guest", "total", "status"
        }  # fmt: skip
        assert b["status"] in ("booked", "cancelled")
        h = app.find(seed["hotels"], "id", b["hotel"])
        assert h is not None and h["name"] == b["hotel_name"] and h["city"] == b["city"]
        assert b["total"] == round(h["price"] * b["nights"], 2)
    assert [r.path for r in app.routes()] == [
        "/", "/results", "/hotel/{id}", "/hotel/{id}/book", "/bookings", "/booking/{id}", "/booking/{id}/cancel"
    ]  # fmt: skip


def test_stay_nights_validates_dates() -> None:
    assert stay_nights("2026-12-10", "2026-12-13") == (3, "")
    assert stay_nights("2026-12-31", "2027-01-02") == (2, "")
    for ci, co in [("2026-12-10", "2026-12-10"), ("2026-12-12", "2026-12-10")]:
        assert stay_nights(ci, co)[0] == 0 and "after" in stay_nights(ci, co)[1]
    for ci, co in [
        ("", ""),
        ("10.12.2026", "2026-12-12"),
        ("2026-02-30", "2026-03-02"),
        ("20261210", "20261212"),
    ]:
        assert stay_nights(ci, co)[0] == 0 and "YYYY-MM-DD" in stay_nights(ci, co)[1]


def test_search_form_ids_and_cities() -> None:
    html = HotelApp().search(Request())
    assert {"city", "check_in", "check_out", "search", "bookings"} <= set(_ids(html))
    assert 'for="city"' in html and 'for="check_in"' in html and 'for="check_out"' in html
    assert 'action="/hotel/results"' in html and 'href="/hotel/bookings"' in html
    for city in ("Berlin", "Hamburg", "Munich"):
        assert city in html


def test_results_sorted_by_price_case_insensitive() -> None:
    app = HotelApp()
    html = app.results(Request(query={"city": "berlin", "check_in": "2026-12-10", "check_out": "2026-12-12"}))
    hotel_ids = [i for i in _ids(html) if i.startswith("hotel-")]
    assert hotel_ids == ["hotel-h2", "hotel-h1", "hotel-h3"]
    assert "/hotel/hotel/h2?check_in=2026-12-10&amp;check_out=2026-12-12" in html
    assert "€49.00" in html and "4.5" in html
    assert 'role="alert"' not in html


@pytest.mark.parametrize(
    ("city", "check_in", "check_out", "needle"),
    [
        ("Berlin", "12/10/2026", "2026-12-12", "YYYY-MM-DD"),
        ("Berlin", "2026-12-12", "2026-12-12", "after"),
        ("Berlin", "2026-12-12", "2026-12-10", "after"),
        ("Paris", "2026-12-10", "2026-12-12", "No hotels in"),
        ("", "2026-12-10", "2026-12-12", "Enter a city"),
    ],
)
def test_results_bad_input_renders_search_form_with_error(
    city: str, check_in: str, check_out: str, needle: str
) -> None:
    app = HotelApp()
    html = app.results(Request(query={"city": city, "check_in": check_in, "check_out": check_out}))
    assert 'role="alert"' in html and needle in html
    assert "search" in _ids(html) and not any(i.startswith("hotel-") for i in _ids(html))
    assert f'value="{check_in}"' in html
    assert app.state() == HotelApp().state()


def test_hotel_detail_shows_nights_total_and_book_form() -> None:
    app = HotelApp()
    html = app.hotel(
        Request(params={"id": "h3"}, query={"check_in": "2026-12-10", "check_out": "2026-12-13"})
    )
    assert {"guest-name", "book"} <= set(_ids(html))
    assert "3 nights" in html and "€568.50" in html
    assert 'value="Alex Morgan"' in html and 'for="guest-name"' in html
    assert 'name="check_in" value="2026-12-10"' in html and 'name="check_out" value="2026-12-13"' in html
    bad = app.hotel(Request(params={"id": "h3"}, query={"check_in": "2026-12-13"}))
    assert 'role="alert"' in bad and "book" not in _ids(bad)


def test_full_booking_and_cancel_flow() -> None:
    app = HotelApp()
    html = _get(
        app,
        "/results",
        Request(query={"city": "Munich", "check_in": "2026-12-10", "check_out": "2026-12-13"}),
    )
    assert [i for i in _ids(html) if i.startswith("hotel-")] == ["hotel-h4", "hotel-h5"]
    form = {"check_in": "2026-12-10", "check_out": "2026-12-13", "guest": "Alex Morgan"}
    out = app.book(Request(params={"id": "h4"}, form=form))
    assert out == Redirect("/booking/S6")
    b = app.state()["bookings"][-1]
    assert b == {
        "id": "S6",
        "hotel": "h4",
        "hotel_name": "Isar Lodge",
        "city": "Munich",
        "check_in": "2026-12-10",
        "check_out": "2026-12-13",
        "nights": 3,
        "guest": "Alex Morgan",
        "total": 297.0,
        "status": "booked",
    }
    assert _hotel(app, "h4")["rooms"] == 4
    assert "booking-S6" in _ids(app.bookings(Request()))
    page = app.booking(Request(params={"id": "S6"}))
    assert {"cancel", "cancel-yes", "cancel-no"} <= set(_ids(page))
    assert 'action="/hotel/booking/S6/cancel"' in page
    assert app.cancel(Request(params={"id": "S6"})) == Redirect("/bookings")
    assert app.state()["bookings"][-1]["status"] == "cancelled"
    assert _hotel(app, "h4")["rooms"] == 5
    assert "cancel" not in _ids(app.booking(Request(params={"id": "S6"})))
    # cancelling twice does not hand the room back twice
    app.cancel(Request(params={"id": "S6"}))
    assert _hotel(app, "h4")["rooms"] == 5


def test_book_total_is_rounded() -> None:
    app = HotelApp()
    app.seed(
        {"hotels": [{"id": "h1", "name": "Odd", "city": "Berlin", "price": 33.333, "rating": 4, "rooms": 1}]}
    )
    app.book(
        Request(params={"id": "h1"}, form={"check_in": "2026-12-01", "check_out": "2026-12-04", "guest": "A"})
    )
    assert app.data["bookings"][-1]["total"] == 100.0
    assert app.data["hotels"][0]["rooms"] == 0


@pytest.mark.parametrize(
    ("hid", "form", "needle"),
    [
        ("h4", {"check_in": "2026-12-10", "check_out": "2026-12-13", "guest": "  "}, "guest"),
        (
            "h5",
            {"check_in": "2026-12-10", "check_out": "2026-12-13", "guest": "Alex Morgan"},
            "No rooms left",
        ),
        ("h4", {"check_in": "2026-12-13", "check_out": "2026-12-10", "guest": "Alex Morgan"}, "after"),
    ],
)
def test_book_errors_keep_state(hid: str, form: dict[str, str], needle: str) -> None:
    app = HotelApp()
    before = app.state()
    out = app.book(Request(params={"id": hid}, form=form))
    assert isinstance(out, str) and 'role="alert"' in out and needle in out
    assert app.state() == before


def test_bookings_list_and_cancelled_detail() -> None:
    app = HotelApp()
    ids = _ids(app.bookings(Request()))
    assert [i for i in ids if i.startswith("booking-")] == [f"booking-S{n}" for n in range(1, 6)]
    assert "bookings" in ids
    cancelled = app.booking(Request(params={"id": "S2"}))
    assert "cancelled" in cancelled and "cancel" not in _ids(cancelled)
    assert "cancel" in _ids(app.booking(Request(params={"id": "S1"})))


def test_unknown_ids_raise_key_error() -> None:
    app = HotelApp()
    with pytest.raises(KeyError):
        app.hotel(Request(params={"id": "h99"}))
    with pytest.raises(KeyError):
        app.book(Request(params={"id": "h99"}, form={}))
    with pytest.raises(KeyError):
        app.booking(Request(params={"id": "S99"}))
    with pytest.raises(KeyError):
        app.cancel(Request(params={"id": "S99"}))


def test_reset_restores_seed() -> None:
    app = HotelApp()
    seed = app.state()
    app.book(
        Request(params={"id": "h1"}, form={"check_in": "2026-12-02", "check_out": "2026-12-03", "guest": "B"})
    )
    app.cancel(Request(params={"id": "S1"}))
    assert app.state() != seed
    app.reset()
    assert app.state() == seed
