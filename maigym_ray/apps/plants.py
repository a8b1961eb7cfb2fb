"""Greenhouse: a plant-care app (watering schedule, due/overdue badges, water, fertilise, add, delete)."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route

TODAY = "2026-12-01"


def _p(pid: str, name: str, species: str, room: str, every_days: int, last_watered: str) -> dict[str, Any]:
    return {
        "id": pid,
        "name": name,
        "species": species,
        "room": room,
        "every_days": every_days,
        "last_watered": last_watered,
    }


def _w(wid: str, plant: str, day: str, action: str = "watered") -> dict[str, Any]:
    return {"id": wid, "plant": plant, "date": day, "action": action}


def next_watering(plant: dict[str, Any]) -> str:
    """The plant's next watering date: ``last_watered`` plus ``every_days`` (YYYY-MM-DD)."""
    return (date.fromisoformat(plant["last_watered"]) + timedelta(days=plant["every_days"])).isoformat()


def badge(plant: dict[str, Any]) -> str:
    """``"overdue"`` before today, ``"due"`` on today, else ``""``."""
    nxt = next_watering(plant)
    return "overdue" if nxt < TODAY else "due" if nxt == TODAY else ""


def _every_days(text: str) -> int | None:
    text = text.strip()
    if not re.fullmatch(r"[0-9]{1,2}", text) or not 1 <= int(text) <= 60:
        return None
    return int(text)


class PlantsApp(App):
    """House plants with a watering interval in days; watering and fertilising are logged per plant."""

    name: ClassVar[str] = "plants"
    title: ClassVar[str] = "Greenhouse"
    icon: ClassVar[str] = "🌱"
    SCHEMA: ClassVar[dict[str, type]] = {"plants": list, "log": list}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "plants": [
                _p("pl1", "Monstera", "Monstera deliciosa", "Living room", 7, "2026-11-24"),
                _p("pl2", "Fiddle-leaf fig", "Ficus lyrata", "Living room", 7, "2026-11-27"),
                _p("pl3", "Snake plant", "Sansevieria trifasciata", "Bedroom", 14, "2026-11-10"),
                _p("pl4", "Basil", "Ocimum basilicum", "Kitchen", 2, "2026-11-30"),
                _p("pl5", "Thai basil", "Ocimum basilicum var. thyrsiflora", "Kitchen", 3, "2026-11-27"),
                _p("pl6", "Peace lily", "Spathiphyllum wallisii", "Office", 5, "2026-11-29"),
                _p("pl7", "Aloe vera", "Aloe barbadensis", "Balcony", 21, "2026-11-15"),
            ],
            "log": [
                _w("w1", "pl7", "2026-11-15"),
                _w("w2", "pl1", "2026-11-15", "fertilised"),
                _w("w3", "pl1", "2026-11-24"),
                _w("w4", "pl2", "2026-11-27"),
                _w("w5", "pl5", "2026-11-27"),
                _w("w6", "pl6", "2026-11-29"),
                _w("w7", "pl4", "2026-11-30"),
                _w("w8", "pl3", "2026-11-10"),
            ],
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.list_plants),
            Route("GET", "/plant/{id}", self.plant),
            Route("POST", "/plant/{id}/water", self.water),
            Route("POST", "/plant/{id}/fertilise", self.fertilise),
            Route("POST", "/plant/{id}/schedule", self.schedule),
            Route("POST", "/plant/{id}/delete", self.delete),
            Route("GET", "/new", self.new),
            Route("POST", "/create", self.create),
        ]

    def _plant(self, pid: str) -> dict[str, Any]:
        p = self.find(self.data["plants"], "id", pid)
        if p is None:
            raise KeyError(f"plant {pid}")
        return p

    def _new_id(self, collection: str, prefix: str) -> str:
        """``next_id``, stepped past ids still in use (deleting a plant shrinks both collections)."""
        rid = self.next_id(collection, prefix)
        taken = {r.get("id") for r in self.data[collection]}
        n = len(self.data[collection]) + 1
        while rid in taken:
            n += 1
            rid = f"{prefix}{n}"
        return rid

    def _log(self, pid: str, action: str) -> None:
        self.data["log"].append(_w(self._new_id("log", "w"), pid, TODAY, action))

    def list_plants(self, req: Request) -> str:
        rows = sorted(
            ((p, next_watering(p), badge(p)) for p in self.data["plants"]),
            key=lambda row: (row[1], row[0]["name"]),
        )
        return self.render("list.html", rows=rows)

    def _detail(self, p: dict[str, Any], error: str = "", every_days: str | None = None) -> str:
        log = sorted(
            (w for w in self.data["log"] if w.get("plant") == p["id"]),
            key=lambda w: w["date"],
            reverse=True,
        )[:5]
        return self.render(
            "plant.html",
            p=p,
            next_date=next_watering(p),
            badge=badge(p),
            log=log,
            every_days=p["every_days"] if every_days is None else every_days,
            error=error,
        )

    def plant(self, req: Request) -> str:
        return self._detail(self._plant(req.params["id"]))

    def water(self, req: Request) -> Redirect:
        p = self._plant(req.params["id"])
        p["last_watered"] = TODAY
        self._log(p["id"], "watered")
        return Redirect(f"/plant/{p['id']}")

    def fertilise(self, req: Request) -> Redirect:
        p = self._plant(req.params["id"])
        self._log(p["id"], "fertilised")
        return Redirect(f"/plant/{p['id']}")

    def schedule(self, req: Request) -> Redirect | str:
        p = self._plant(req.params["id"])
        raw = req.form.get("every_days", "")
        days = _every_days(raw)
        if days is None:
            return self._detail(p, "Water every 1 to 60 days (a whole number).", raw)
        p["every_days"] = days
        return Redirect(f"/plant/{p['id']}")

    def delete(self, req: Request) -> Redirect:
        p = self._plant(req.params["id"])
        self.data["plants"].remove(p)
        self.data["log"] = [w for w in self.data["log"] if w.get("plant") != p["id"]]
        return Redirect("/")

    def new(self, req: Request) -> str:
        return self.render("form.html", f={"name": "", "species": "", "room": "", "every_days": "7"})

    def create(self, req: Request) -> Redirect | str:
        f = {k: req.form.get(k, "").strip() for k in ("name", "species", "room", "every_days")}
        days = _every_days(f["every_days"])
        err = "" if f["name"] else "A name is required."
        if not err and days is None:
            err = "Water every 1 to 60 days (a whole number)."
        if err or days is None:
            return self.render("form.html", f=f, error=err)
        pid = self._new_id("plants", "pl")
        self.data["plants"].append(_p(pid, f["name"], f["species"], f["room"], days, TODAY))
        return Redirect(f"/plant/{pid}")
