"""Hail: a ride-hailing app (pickup and destination, ride type with fares, request, cancel, rate)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route


class RideApp(App):
    """Ride hailing: fares are base + per-km x straight-line distance between saved places."""

    name: ClassVar[str] = "ride"
    title: ClassVar[str] = "Hail"
    icon: ClassVar[str] = "🚕"
    SCHEMA: ClassVar[dict[str, type]] = {"places": list, "ride_types": list, "rides": list, "payment": str}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "places": [
                {"name": "Home", "address": "12 Linden Road", "x": 0.0, "y": 0.0},
                {"name": "Office", "address": "5 Market Square", "x": 3.0, "y": 4.0},
                {"name": "Central Station", "address": "1 Station Place", "x": 6.0, "y": 8.0},
                {"name": "Airport", "address": "Terminal 1", "x": 12.0, "y": 16.0},
                {"name": "City Gym", "address": "88 River Street", "x": 1.0, "y": 2.0},
            ],
            "ride_types": [
                {"id": "economy", "name": "Economy", "base": 3.0, "per_km": 1.2},
                {"id": "comfort", "name": "Comfort", "base": 4.5, "per_km": 1.6},
                {"id": "xl", "name": "XL", "base": 6.0, "per_km": 2.1},
            ],
            "rides": [
                {
                    "id": "R1",
                    "pickup": "Home",
                    "destination": "Airport",
                    "type": "comfort",
                    "price": 36.5,
                    "date": "2026-11-20",
                    "status": "completed",
                    "rating": 0,
                },
                {
                    "id": "R2",
                    "pickup": "Office",
                    "destination": "Home",
                    "type": "economy",
                    "price": 9.0,
                    "date": "2026-11-24",
                    "status": "completed",
                    "rating": 4,
                },
            ],
            "payment": "Visa ••4242",
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.home),
            Route("GET", "/options", self.options),
            Route("POST", "/request", self.request_ride),
            Route("GET", "/rides", self.history),
            Route("GET", "/ride/{id}", self.ride),
            Route("POST", "/ride/{id}/cancel", self.cancel),
            Route("POST", "/ride/{id}/rate", self.rate),
        ]

    def _place(self, name: str) -> dict[str, Any] | None:
        return next((p for p in self.data["places"] if p["name"].lower() == name.strip().lower()), None)

    def fare(self, pickup: str, destination: str, ride_type: str) -> float:
        """The fare of ``ride_type`` between two saved places, rounded to cents."""
        a, b = self._place(pickup), self._place(destination)
        rt = self.find(self.data["ride_types"], "id", ride_type)
        if a is None or b is None or rt is None:
            raise KeyError(f"{pickup}/{destination}/{ride_type}")
        km = math.hypot(a["x"] - b["x"], a["y"] - b["y"])
        return round(rt["base"] + rt["per_km"] * km, 2)

    def _ride(self, rid: str) -> dict[str, Any]:
        r = self.find(self.data["rides"], "id", rid)
        if r is None:
            raise KeyError(f"ride {rid}")
        return r

    def home(self, req: Request) -> str:
        active = [r for r in self.data["rides"] if r["status"] == "requested"]
        return self.render("home.html", places=self.data["places"], active=active)

    def options(self, req: Request) -> str:
        pickup, dest = req.query.get("pickup", ""), req.query.get("destination", "")
        a, b = self._place(pickup), self._place(dest)
        if a is None or b is None or a is b:
            return self.render(
                "home.html", places=self.data["places"], active=[], error="Choose two different saved places."
            )
        fares = [(rt, self.fare(a["name"], b["name"], rt["id"])) for rt in self.data["ride_types"]]
        return self.render("options.html", a=a, b=b, fares=fares, payment=self.data["payment"])

    def request_ride(self, req: Request) -> Redirect | str:
        pickup, dest, rtype = (req.form.get(k, "") for k in ("pickup", "destination", "type"))
        try:
            price = self.fare(pickup, dest, rtype)
        except KeyError:
            return self.render(
                "home.html",
                places=self.data["places"],
                active=[],
                error="Choose a ride type before requesting.",
            )
        rid = self.next_id("rides", "R")
        self.data["rides"].append(
            {
                "id": rid,
                "pickup": self._place(pickup)["name"],  # type: ignore[index]
                "destination": self._place(dest)["name"],  # type: ignore[index]
                "type": rtype,
                "price": price,
                "date": "2026-12-01",
                "status": "requested",
                "rating": 0,
            }
        )
        return Redirect(f"/ride/{rid}")

    def history(self, req: Request) -> str:
        return self.render("history.html", rides=list(reversed(self.data["rides"])))

    def ride(self, req: Request) -> str:
        return self.render("ride.html", r=self._ride(req.params["id"]))

    def cancel(self, req: Request) -> Redirect:
        r = self._ride(req.params["id"])
        if r["status"] == "requested":
            r["status"] = "cancelled"
        return Redirect(f"/ride/{r['id']}")

    def rate(self, req: Request) -> Redirect | str:
        r = self._ride(req.params["id"])
        stars = req.form.get("stars", "")
        if r["status"] != "completed" or stars not in {"1", "2", "3", "4", "5"}:
            return self.render("ride.html", r=r, error="Pick 1 to 5 stars for a completed ride.")
        r["rating"] = int(stars)
        return Redirect(f"/ride/{r['id']}")
