"""Parcels: a parcel-tracking app (list, search, details, reschedule, redirect to a locker, courier note)."""

from __future__ import annotations

import re
from datetime import date
from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

STATUSES = ("in transit", "out for delivery", "delivered")
EARLIEST_ETA = "2026-12-02"  # the day after "today" (2026-12-01)
NOTE_MAX = 120
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _p(
    pid: str, tracking: str, sender: str, status: str, eta: str, locker: str = "", note: str = ""
) -> dict[str, Any]:
    return {
        "id": pid,
        "tracking": tracking,
        "sender": sender,
        "status": status,
        "eta": eta,
        "locker": locker,
        "note": note,
    }


def _valid_date(text: str) -> bool:
    if not _DATE.fullmatch(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


class ParcelApp(App):
    """Incoming parcels: reschedule the delivery date, send to a pickup locker, leave a note for the courier.

    A parcel whose status is ``delivered`` can no longer be changed.
    """

    name: ClassVar[str] = "parcel"
    title: ClassVar[str] = "Parcels"
    icon: ClassVar[str] = "📦"
    SCHEMA: ClassVar[dict[str, type]] = {"parcels": list, "lockers": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "parcels": [
                _p("P1", "PK48213907", "Nordwind Books", "in transit", "2026-12-03"),
                _p("P2", "PK48213970", "Nordwind Bikes", "in transit", "2026-12-04"),
                _p(
                    "P3",
                    "PK55019342",
                    "Lumen Electronics",
                    "out for delivery",
                    "2026-12-01",
                    note="Please ring twice.",
                ),
                _p("P4", "PK60277418", "Green Leaf Tea Co.", "in transit", "2026-12-06", locker="L2"),
                _p("P5", "PK31984025", "Atelier Sofia Shoes", "delivered", "2026-11-28"),
                _p("P6", "PK77340561", "Pharma Direct", "in transit", "2026-12-05"),
                _p("P7", "PK12093388", "Lumen Electronics", "delivered", "2026-11-24", locker="L1"),
            ],
            "lockers": [
                {"id": "L1", "name": "Locker Central Station", "address": "Bahnhofplatz 1, main hall"},
                {
                    "id": "L2",
                    "name": "Locker Central Market",
                    "address": "Marktstraße 12, by the south entrance",
                },
                {"id": "L3", "name": "Locker Riverside Mall", "address": "Uferweg 40, car park level 1"},
                {"id": "L4", "name": "Locker University Library", "address": "Campusallee 3"},
                {"id": "L5", "name": "Locker Oak Street", "address": "Eichenstraße 77, next to the pharmacy"},
            ],
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.list_parcels),
            Route("GET", "/parcel/{id}", self.parcel),
            Route("POST", "/parcel/{id}/eta", self.set_eta),
            Route("POST", "/parcel/{id}/locker", self.set_locker),
            Route("POST", "/parcel/{id}/note", self.set_note),
        ]

    def _parcel(self, pid: str) -> dict[str, Any]:
        p = self.find(self.data["parcels"], "id", pid)
        if p is None:
            raise KeyError(f"parcel {pid}")
        return p

    def _detail(self, p: dict[str, Any], error: str = "", **values: str) -> str:
        """The detail screen; ``values`` overrides what the eta/note inputs show (to keep bad input)."""
        locker = self.find(self.data["lockers"], "id", p["locker"]) if p["locker"] else None
        form = {"eta": p["eta"], "note": p["note"], **values}
        return self.render(
            "parcel.html", p=p, locker=locker, lockers=self.data["lockers"], form=form, error=error
        )

    def list_parcels(self, req: Request) -> str:
        q = req.query.get("q", "").strip().lower()
        found = [
            p for p in self.data["parcels"] if not q or q in p["tracking"].lower() or q in p["sender"].lower()
        ]
        found.sort(key=lambda p: (p["status"] == "delivered", p["eta"]))
        return self.render("list.html", parcels=found, q=req.query.get("q", ""))

    def parcel(self, req: Request) -> str:
        return self._detail(self._parcel(req.params["id"]))

    def _editable(self, p: dict[str, Any]) -> str:
        return "This parcel has already been delivered." if p["status"] == "delivered" else ""

    def set_eta(self, req: Request) -> Redirect | str:
        p = self._parcel(req.params["id"])
        eta = req.form.get("eta", "").strip()
        err = self._editable(p)
        if not err and not _valid_date(eta):
            err = "Enter the new delivery date as YYYY-MM-DD."
        elif not err and eta < EARLIEST_ETA:
            err = f"The earliest possible delivery date is {EARLIEST_ETA}."
        if err:
            return self._detail(p, err, eta=eta)
        p["eta"] = eta
        return Redirect(f"/parcel/{p['id']}")

    def set_locker(self, req: Request) -> Redirect | str:
        p = self._parcel(req.params["id"])
        lid = req.form.get("locker", "").strip()
        err = self._editable(p)
        if not err and self.find(self.data["lockers"], "id", lid) is None:
            err = "Choose a locker from the list."
        if err:
            return self._detail(p, err)
        p["locker"] = lid
        return Redirect(f"/parcel/{p['id']}")

    def set_note(self, req: Request) -> Redirect | str:
        p = self._parcel(req.params["id"])
        note = req.form.get("note", "").strip()
        err = self._editable(p)
        if not err and len(note) > NOTE_MAX:
            err = f"The note can be at most {NOTE_MAX} characters long."
        if err:
            return self._detail(p, err, note=note)
        p["note"] = note
        return Redirect(f"/parcel/{p['id']}")
