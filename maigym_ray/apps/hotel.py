"""Stays: a hotel-booking app (search a city for dates, compare hotels, book a room, cancel with confirmation)."""

from __future__ import annotations

import re
from datetime import date
from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _h(hid: str, name: str, city: str, price: float, rating: float, rooms: int) -> dict[str, Any]:
    return {"id": hid, "name": name, "city": city, "price": price, "rating": rating, "rooms": rooms}


def _b(
    bid: str, h: dict[str, Any], check_in: str, check_out: str, guest: str, status: str = "booked"
) -> dict[str, Any]:
    nights = (date.fromisoformat(check_out) - date.fromisoformat(check_in)).days
    return {
        "id": bid,
        "hotel": h["id"],
        "hotel_name": h["name"],
        "city": h["city"],
        "check_in": check_in,
        "check_out": check_out,
        "nights": nights,
        "guest": guest,
        "total": round(h["price"] * nights, 2),
        "status": status,
    }


def _day(text: str) -> date | None:
    if not _DAY.fullmatch(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def stay_nights(check_in: str, check_out: str) -> tuple[int, str]:
    """Nights between two YYYY-MM-DD dates, or ``(0, error)`` when a date is malformed or not in order."""
    start, end = _day(check_in), _day(check_out)
    if start is None or end is None:
        return 0, "Enter check-in and check-out dates as YYYY-MM-DD."
    nights = (end - start).days
    if nights <= 0:
        return 0, "Check-out must be after check-in."
    return nights, ""


class HotelApp(App):
    """Hotels per city with a nightly price, a rating and rooms left; bookings for the guest can be cancelled."""

    name: ClassVar[str] = "hotel"
    title: ClassVar[str] = "Stays"
    icon: ClassVar[str] = "🏨"
    SCHEMA: ClassVar[dict[str, type]] = {"guest": str, "hotels": list, "bookings": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        hotels = [
            _h("h1", "Hotel Adlerhof", "Berlin", 129.0, 4.5, 4),
            _h("h2", "Adler Hostel", "Berlin", 49.0, 3.9, 10),
            _h("h3", "Spree Suites", "Berlin", 189.5, 4.7, 2),
            _h("h4", "Isar Lodge", "Munich", 99.0, 4.2, 5),
            _h("h5", "Hotel Marienplatz", "Munich", 159.0, 4.6, 0),
            _h("h6", "Elbe Harbour Hotel", "Hamburg", 119.0, 4.4, 3),
            _h("h7", "Alster Inn", "Hamburg", 89.0, 4.0, 6),
        ]
        h = {x["id"]: x for x in hotels}
        return {
            "guest": "Alex Morgan",
            "hotels": hotels,
            "bookings": [
                _b("S1", h["h6"], "2026-12-10", "2026-12-12", "Alex Morgan"),
                _b("S2", h["h1"], "2026-12-11", "2026-12-12", "Alex Morgan", "cancelled"),
                _b("S3", h["h4"], "2026-11-20", "2026-11-23", "Alex Morgan"),
                _b("S4", h["h2"], "2026-12-11", "2026-12-13", "Jamie Morgan"),
                _b("S5", h["h7"], "2026-11-27", "2026-11-29", "Alex Morgan", "cancelled"),
            ],
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.search),
            Route("GET", "/results", self.results),
            Route("GET", "/hotel/{id}", self.hotel),
            Route("POST", "/hotel/{id}/book", self.book),
            Route("GET", "/bookings", self.bookings),
            Route("GET", "/booking/{id}", self.booking),
            Route("POST", "/booking/{id}/cancel", self.cancel),
        ]

    def _hotel(self, hid: str) -> dict[str, Any]:
        h = self.find(self.data["hotels"], "id", hid)
        if h is None:
            raise KeyError(f"hotel {hid}")
        return h

    def _booking(self, bid: str) -> dict[str, Any]:
        b = self.find(self.data["bookings"], "id", bid)
        if b is None:
            raise KeyError(f"booking {bid}")
        return b

    def _cities(self) -> list[str]:
        return sorted({h["city"] for h in self.data["hotels"]})

    def _search_form(self, city: str = "", check_in: str = "", check_out: str = "", error: str = "") -> str:
        return self.render(
            "search.html",
            cities=self._cities(),
            city=city,
            check_in=check_in,
            check_out=check_out,
            error=error,
        )

    def search(self, req: Request) -> str:
        return self._search_form()

    def results(self, req: Request) -> str:
        city, check_in, check_out = (req.query.get(k, "").strip() for k in ("city", "check_in", "check_out"))
        nights, err = stay_nights(check_in, check_out)
        found = [h for h in self.data["hotels"] if h["city"].lower() == city.lower()]
        if not err and not found:
            err = f"No hotels in {city!r}. Choose one of: {', '.join(self._cities())}." if city else ""
            err = err or "Enter a city."
        if err:
            return self._search_form(city, check_in, check_out, err)
        found.sort(key=lambda h: (h["price"], h["name"]))
        return self.render(
            "results.html",
            hotels=found,
            city=found[0]["city"],
            check_in=check_in,
            check_out=check_out,
            nights=nights,
        )

    def _detail(self, h: dict[str, Any], check_in: str, check_out: str, guest: str, error: str = "") -> str:
        nights, err = stay_nights(check_in, check_out)
        return self.render(
            "hotel.html",
            h=h,
            check_in=check_in,
            check_out=check_out,
            nights=nights,
            total=round(h["price"] * nights, 2),
            guest=guest,
            error=error or err,
        )

    def hotel(self, req: Request) -> str:
        h = self._hotel(req.params["id"])
        return self._detail(
            h, req.query.get("check_in", ""), req.query.get("check_out", ""), self.data["guest"]
        )

    def book(self, req: Request) -> Redirect | str:
        h = self._hotel(req.params["id"])
        check_in, check_out, guest = (req.form.get(k, "").strip() for k in ("check_in", "check_out", "guest"))
        _, err = stay_nights(check_in, check_out)
        if not err and not guest:
            err = "Enter the guest's name."
        if not err and h["rooms"] <= 0:
            err = f"No rooms left at {h['name']}."
        if err:
            return self._detail(h, check_in, check_out, guest, err)
        h["rooms"] -= 1
        bid = self.next_id("bookings", "S")
        self.data["bookings"].append(_b(bid, h, check_in, check_out, guest))
        return Redirect(f"/booking/{bid}")

    def bookings(self, req: Request) -> str:
        return self.render("bookings.html", bookings=self.data["bookings"])

    def booking(self, req: Request) -> str:
        return self.render("booking.html", b=self._booking(req.params["id"]))

    def cancel(self, req: Request) -> Redirect:
        b = self._booking(req.params["id"])
        if b["status"] == "booked":
            b["status"] = "cancelled"
            h = self.find(self.data["hotels"], "id", b["hotel"])
            if h is not None:
                h["rooms"] += 1
        return Redirect("/bookings")
