"""Rail: a train-ticket app (search, choose a seat class, passengers, pay, cancel with refund)."""

from __future__ import annotations

from typing import Any, ClassVar

from maigym_ray.apps.app import App, Redirect, Request, Route


def _train(
    tid: str, frm: str, to: str, date: str, dep: str, arr: str, eco: float, first: float
) -> dict[str, Any]:
    return {
        "id": tid,
        "from": frm,
        "to": to,
        "date": date,
        "dep": dep,
        "arr": arr,
        "prices": {"economy": eco, "first": first},
        "seats": 40,
    }


class TrainApp(App):
    """Train tickets: search by route and date, pick a train and a class, name passengers, pay, cancel."""

    name: ClassVar[str] = "train"
    title: ClassVar[str] = "Rail"
    icon: ClassVar[str] = "🚆"
    SCHEMA: ClassVar[dict[str, type]] = {"stations": list, "trains": list, "bookings": list, "traveller": str}

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        return {
            "stations": ["Berlin", "Munich", "Hamburg", "Cologne", "Frankfurt"],
            "trains": [
                _train("ICE501", "Berlin", "Munich", "2026-12-03", "06:02", "10:01", 59.0, 99.0),
                _train("ICE503", "Berlin", "Munich", "2026-12-03", "08:02", "12:05", 69.0, 119.0),
                _train("IC203", "Berlin", "Munich", "2026-12-03", "10:15", "15:40", 39.0, 89.0),
                _train("ICE611", "Munich", "Berlin", "2026-12-04", "07:00", "11:02", 65.0, 110.0),
                _train("ICE615", "Munich", "Berlin", "2026-12-04", "17:00", "21:04", 79.0, 129.0),
                _train("ICE617", "Munich", "Berlin", "2026-12-04", "19:00", "23:09", 49.0, 95.0),
                _train("IC2021", "Hamburg", "Cologne", "2026-12-05", "07:45", "11:50", 35.0, 70.0),
                _train("ICE925", "Hamburg", "Cologne", "2026-12-05", "09:10", "13:12", 55.0, 92.0),
                _train("ICE1001", "Frankfurt", "Berlin", "2026-12-06", "12:00", "16:10", 62.0, 104.0),
            ],
            "bookings": [
                {
                    "id": "B1",
                    "train": "ICE1001",
                    "class": "economy",
                    "passengers": ["Alex Morgan"],
                    "total": 62.0,
                    "status": "booked",
                },
            ],
            "traveller": "Alex Morgan",
        }

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.search),
            Route("GET", "/results", self.results),
            Route("GET", "/train/{id}", self.train),
            Route("GET", "/train/{id}/passengers", self.passengers),
            Route("GET", "/train/{id}/review", self.review),
            Route("POST", "/train/{id}/book", self.book),
            Route("GET", "/trips", self.trips),
            Route("GET", "/booking/{id}", self.booking),
            Route("POST", "/booking/{id}/cancel", self.cancel),
        ]

    def _get_train(self, tid: str) -> dict[str, Any]:
        t = self.find(self.data["trains"], "id", tid)
        if t is None:
            raise KeyError(f"train {tid}")
        return t

    def search(self, req: Request) -> str:
        return self.render("search.html", stations=self.data["stations"])

    def results(self, req: Request) -> str:
        frm, to, date = (req.query.get(k, "").strip() for k in ("from", "to", "date"))
        found = [
            t
            for t in self.data["trains"]
            if t["from"].lower() == frm.lower() and t["to"].lower() == to.lower() and t["date"] == date
        ]
        found.sort(key=lambda t: t["dep"])
        return self.render("results.html", trains=found, frm=frm, to=to, date=date)

    def train(self, req: Request) -> str:
        return self.render("train.html", t=self._get_train(req.params["id"]))

    def _selection(self, req: Request) -> tuple[dict[str, Any], str, int]:
        t = self._get_train(req.params["id"])
        cls = req.query.get("class", "")
        try:
            count = int(req.query.get("count", "1"))
        except ValueError:
            count = 0
        return t, cls, count

    def passengers(self, req: Request) -> str:
        t, cls, count = self._selection(req)
        if cls not in ("economy", "first") or not 1 <= count <= 6:
            return self.render("train.html", t=t, error="Choose a class and 1 to 6 passengers.")
        return self.render("passengers.html", t=t, cls=cls, count=count, traveller=self.data["traveller"])

    def review(self, req: Request) -> str:
        t, cls, count = self._selection(req)
        names = [req.query.get(f"p{i}", "").strip() for i in range(1, count + 1)]
        if cls not in t["prices"] or not names or not all(names):
            return self.render(
                "passengers.html",
                t=t,
                cls=cls,
                count=max(count, 1),
                traveller=self.data["traveller"],
                error="Every passenger needs a name.",
            )
        total = round(t["prices"][cls] * len(names), 2)
        return self.render("review.html", t=t, cls=cls, names=names, total=total)

    def book(self, req: Request) -> Redirect | str:
        t = self._get_train(req.params["id"])
        cls = req.form.get("class", "")
        names = [n for n in req.form_lists.get("passenger", []) if n.strip()]
        if cls not in t["prices"] or not names:
            return self.render("train.html", t=t, error="Booking details are incomplete.")
        if t["seats"] < len(names):
            return self.render("train.html", t=t, error="Not enough seats left.")
        t["seats"] -= len(names)
        bid = self.next_id("bookings", "B")
        self.data["bookings"].append(
            {
                "id": bid,
                "train": t["id"],
                "class": cls,
                "passengers": names,
                "total": round(t["prices"][cls] * len(names), 2),
                "status": "booked",
            }
        )
        return Redirect(f"/booking/{bid}?new=1")

    def trips(self, req: Request) -> str:
        rows = [(b, self.find(self.data["trains"], "id", b["train"])) for b in self.data["bookings"]]
        return self.render("trips.html", rows=rows)

    def booking(self, req: Request) -> str:
        b = self.find(self.data["bookings"], "id", req.params["id"])
        if b is None:
            raise KeyError(f"booking {req.params['id']}")
        t = self.find(self.data["trains"], "id", b["train"])
        flash = "Payment received. Your booking is confirmed." if req.query.get("new") else ""
        return self.render("booking.html", b=b, t=t, flash=flash)

    def cancel(self, req: Request) -> Redirect:
        b = self.find(self.data["bookings"], "id", req.params["id"])
        if b is None:
            raise KeyError(f"booking {req.params['id']}")
        if b["status"] == "booked":
            b["status"] = "refunded"
            t = self.find(self.data["trains"], "id", b["train"])
            if t is not None:
                t["seats"] += len(b["passengers"])
        return Redirect(f"/booking/{b['id']}")
