"""Single-app templates over the novel apps (parcel tracking, the library, plant care): the ``ood_app``
split, apps no training task touches.
"""

from __future__ import annotations

import random

from maigym_ray.synth.drafts import Draft, answer, exists, template
from maigym_ray.synth.planner import Answer, Click, ClickRow, ClickText, Open, Read, Type
from maigym_ray.synth.world import World


@template("parcel_reschedule", ("parcel",))
def parcel_reschedule(w: World, rng: random.Random) -> list[Draft]:
    p = rng.choice([p for p in w.parcels if p["status"] != "delivered"])
    date = f"2026-12-{rng.randrange(10, 20):02d}"
    return [
        Draft(
            "parcel_reschedule",
            f"Reschedule the delivery of the parcel from {p['sender']} to {date}.",
            ("parcel",),
            "state",
            (exists("parcel", "parcels", id=p["id"], eta=date),),
            (Open("parcel"), ClickText("parcel-", p["sender"]), Type("eta", date), Click("save-eta")),
        )
    ]


@template("parcel_eta", ("parcel",))
def parcel_eta(w: World, rng: random.Random) -> list[Draft]:
    p = rng.choice([p for p in w.parcels if p["status"] != "delivered"])
    return [
        Draft(
            "parcel_eta",
            f"When is the parcel with tracking number {p['tracking']} expected? Answer with the date.",
            ("parcel",),
            "info",
            (answer(p["eta"]),),
            (
                Open("parcel"),
                Type("search-box", p["tracking"]),
                Click("search"),
                ClickRow("parcel-", lambda rows, env: rows[0][0] if len(rows) == 1 else ""),
                Read(r"(2026-\d\d-\d\d)", ("eta",)),
                Answer("{eta}"),
            ),
        )
    ]


@template("library_borrow", ("library",))
def library_borrow(w: World, rng: random.Random) -> list[Draft]:
    loaned = {ln["book"] for ln in w.loans}
    free = [b for b in w.books if b["copies"] > 0 and b["id"] not in loaned]
    if not free:
        return []
    b = rng.choice(free)
    return [
        Draft(
            "library_borrow",
            f"Borrow \u201c{b['title']}\u201d by {b['author']} from the library.",
            ("library",),
            "state",
            (exists("library", "loans", book=b["id"], status="active"),),
            (
                Open("library"),
                Type("search-box", b["title"]),
                Click("search"),
                ClickText("book-", b["title"]),
                Click("borrow"),
            ),
        )
    ]


@template("library_renew", ("library",))
def library_renew(w: World, rng: random.Random) -> list[Draft]:
    ln = rng.choice(w.loans)
    return [
        Draft(
            "library_renew",
            f"Renew your loan of \u201c{ln['title']}\u201d.",
            ("library",),
            "state",
            (exists("library", "loans", id=ln["id"], renewals=ln["renewals"] + 1),),
            (Open("library"), Click("loans"), ClickText("loan-", ln["title"]), Click("renew")),
        )
    ]


@template("plants_water", ("plants",))
def plants_water(w: World, rng: random.Random) -> list[Draft]:
    p = rng.choice(w.plants)
    return [
        Draft(
            "plants_water",
            f"Log that you watered the {p['name']} today.",
            ("plants",),
            "state",
            (exists("plants", "log", plant=p["id"], action="watered"),),
            (Open("plants"), ClickText("plant-", p["name"]), Click("water")),
        )
    ]


@template("plants_schedule", ("plants",))
def plants_schedule(w: World, rng: random.Random) -> list[Draft]:
    p = rng.choice(w.plants)
    n = rng.choice([d for d in (2, 4, 6, 8, 12, 21) if d != p["every_days"]])
    return [
        Draft(
            "plants_schedule",
            f"From now on the {p['name']} should be watered every {n} days. Update its schedule.",
            ("plants",),
            "state",
            (exists("plants", "plants", id=p["id"], every_days=n),),
            (
                Open("plants"),
                ClickText("plant-", p["name"]),
                Type("every-days", str(n)),
                Click("save-schedule"),
            ),
        )
    ]
