"""Agenda: a calendar app (agenda by day, event details, create, edit, delete with confirmation)."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d")


def _ev(
    eid: str, title: str, date: str, start: str, end: str, location: str = "", attendees: str = ""
) -> dict:
    return {
        "id": eid,
        "title": title,
        "date": date,
        "start": start,
        "end": end,
        "location": location,
        "attendees": [a for a in attendees.split(",") if a],
    }


class CalendarApp(App):
    """Calendar events with a date, start and end time, a location and attendees."""

    name: ClassVar[str] = "calendar"
    title: ClassVar[str] = "Agenda"
    icon: ClassVar[str] = "📅"
    SCHEMA: ClassVar[dict[str, type]] = {"events": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "events": [
                _ev("e1", "Team sync", "2026-12-07", "10:00", "10:30", "Room 2A", "dave@example.com"),
                _ev("e2", "Gym", "2026-12-07", "18:00", "19:00", "City Gym"),
                _ev(
                    "e3",
                    "Quarterly review",
                    "2026-12-09",
                    "14:00",
                    "15:30",
                    "Room 1C",
                    "carol@example.com,erin@example.com",
                ),
                _ev("e4", "Design review", "2026-12-11", "11:15", "12:00", "Room Aurora", "erin@example.com"),
            ]
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.agenda),
            Route("GET", "/event/{id}", self.event),
            Route("GET", "/event/{id}/edit", self.edit),
            Route("POST", "/event/{id}/save", self.save),
            Route("POST", "/event/{id}/delete", self.delete),
            Route("GET", "/new", self.new),
            Route("POST", "/create", self.create),
        ]

    def _event(self, eid: str) -> dict[str, Any]:
        e = self.find(self.data["events"], "id", eid)
        if e is None:
            raise KeyError(f"event {eid}")
        return e

    def agenda(self, req: Request) -> str:
        days: dict[str, list[dict[str, Any]]] = {}
        for e in sorted(self.data["events"], key=lambda e: (e["date"], e["start"])):
            days.setdefault(e["date"], []).append(e)
        return self.render("agenda.html", days=days)

    def event(self, req: Request) -> str:
        return self.render("event.html", e=self._event(req.params["id"]))

    def edit(self, req: Request) -> str:
        return self.render("form.html", e=self._event(req.params["id"]), action="save")

    @staticmethod
    def _fields(form: dict[str, str]) -> tuple[dict[str, Any], str]:
        f = {k: form.get(k, "").strip() for k in ("title", "date", "start", "end", "location", "attendees")}
        if not f["title"]:
            return f, "A title is required."
        if not _DATE.fullmatch(f["date"]):
            return f, "Date must look like 2026-12-31."
        if not (_TIME.fullmatch(f["start"]) and _TIME.fullmatch(f["end"])) or f["end"] <= f["start"]:
            return f, "Times must look like 09:30, and the end must be after the start."
        out: dict[str, Any] = dict(f)
        out["attendees"] = [a.strip() for a in f["attendees"].split(",") if a.strip()]
        return out, ""

    def save(self, req: Request) -> Redirect | str:
        e = self._event(req.params["id"])
        f, err = self._fields(req.form)
        if err:
            return self.render("form.html", e={**e, **f, "id": e["id"]}, action="save", error=err)
        e.update(f)
        return Redirect(f"/event/{e['id']}")

    def delete(self, req: Request) -> Redirect:
        e = self._event(req.params["id"])
        self.data["events"].remove(e)
        return Redirect("/")

    def new(self, req: Request) -> str:
        blank = {"id": "", "title": "", "date": "", "start": "", "end": "", "location": "", "attendees": []}
        return self.render("form.html", e=blank, action="create")

    def create(self, req: Request) -> Redirect | str:
        f, err = self._fields(req.form)
        if err:
            return self.render("form.html", e={**f, "id": ""}, action="create", error=err)
        eid = f"e{max([int(e['id'][1:]) for e in self.data['events'] if e['id'][1:].isdigit()] + [0]) + 1}"
        self.data["events"].append({"id": eid, **f})
        return Redirect(f"/event/{eid}")
