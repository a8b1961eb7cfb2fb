"""Single-app templates over the service apps: train and hotel booking, banking, food ordering and ride
hailing. Their choices ("the cheapest", "the first that arrives in time") are computed from the world's facts
for the checks and made over the screen's rows by the plan.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable

from maigym_ray.apps.food import FoodApp
from maigym_ray.synth.drafts import Draft, answer, cheapest, exists, template, times
from maigym_ray.synth.planner import Answer, Click, ClickRow, ClickText, Open, Read, Step, Type
from maigym_ray.synth.world import World


# -- train --------------------------------------------------------------------------------------------------------
def search_trains(frm: str, to: str, date: str) -> tuple[Step, ...]:
    """Search the timetable (``{var}`` allowed)."""
    return (Open("train"), Type("from", frm), Type("to", to), Type("date", date), Click("search"))


def book_train(traveller: str) -> tuple[Step, ...]:
    """On a train's page: economy, one passenger, review, pay."""
    return (
        Click("class-economy"),
        Click("continue"),
        Type("passenger-1", traveller),
        Click("review"),
        Click("pay"),
        Click("pay-yes"),
    )


@template("train_cheapest", ("train",))
def train_cheapest(w: World, rng: random.Random) -> list[Draft]:
    day = [t for t in w.trains if t.date == w.main.date and t.frm == w.home_city]
    best = min(day, key=lambda t: t.economy)
    return [
        Draft(
            "train_cheapest",
            f"Book one economy ticket on the cheapest train from {w.home_city} to {w.city} on {w.main.date} "
            f"for {w.me.name}.",
            ("train",),
            "state",
            (exists("train", "bookings", train=best.id, **{"class": "economy"}, status="booked"),),
            (
                *search_trains(w.home_city, w.city, w.main.date),
                ClickRow("train-", cheapest),
                *book_train(w.me.name),
            ),
        )
    ]


@template("train_first", ("train",))
def train_first(w: World, rng: random.Random) -> list[Draft]:
    day = [t for t in w.trains if t.date == w.main.date and t.frm == w.home_city]
    first = min(day, key=lambda t: t.dep)
    return [
        Draft(
            "train_first",
            f"When does the first train from {w.home_city} to {w.city} on {w.main.date} leave? Answer with HH:MM.",
            ("train",),
            "info",
            (answer(first.dep),),
            (
                *search_trains(w.home_city, w.city, w.main.date),
                ClickRow("train-", lambda rows, env: min(rows, key=lambda r: times(r[1])[0])[0]),
                Read(r"departs (\d\d:\d\d)", ("dep",)),
                Answer("{dep}"),
            ),
        )
    ]


# -- bank ---------------------------------------------------------------------------------------------------------
def transfer(payee: str, amount: str, reference: str) -> tuple[Step, ...]:
    """Send money to a saved payee (``{var}`` allowed in amount and reference)."""
    return (
        Open("bank"),
        Click("transfer"),
        ClickText("payee-", payee),
        Type("amount", amount),
        Type("reference", reference),
        Click("review"),
        Click("confirm"),
    )


@template("bank_transfer", ("bank",))
def bank_transfer(w: World, rng: random.Random) -> list[Draft]:
    p = rng.choice((w.people[4], w.people[5]))
    amount = round(rng.randrange(500, 9000) / 100, 2)
    ref = rng.choice(("Concert", "Groceries", "Birthday gift", "Football"))
    return [
        Draft(
            "bank_transfer",
            f"Transfer {amount:.2f} EUR to {p.name} with the reference \u201c{ref}\u201d.",
            ("bank",),
            "state",
            (exists("bank", "transactions", counterparty=p.name, amount=-amount, reference=ref),),
            transfer(p.name, f"{amount:.2f}", ref),
        )
    ]


@template("bank_lookup", ("bank",))
def bank_lookup(w: World, rng: random.Random) -> list[Draft]:
    t = rng.choice(w.transactions)
    same = [x for x in w.transactions if x["counterparty"] == t["counterparty"] and x["date"] == t["date"]]
    if len(same) != 1:
        return []
    return [
        Draft(
            "bank_lookup",
            f"How much did you pay {t['counterparty']} on {t['date']}? Answer with the amount in EUR.",
            ("bank",),
            "info",
            (answer(f"{-t['amount']:.2f}", numeric=True),),
            (
                Open("bank"),
                ClickRow(
                    "tx-",
                    lambda rows, env, t=t: next(
                        (i for i, r in rows if t["counterparty"] in r and t["date"] in r), ""
                    ),
                ),
                Read(r"€\s*([\d.]+)", ("amt",)),
                Answer("{amt}"),
            ),
        )
    ]


@template("bank_add_payee", ("bank",))
def bank_add_payee(w: World, rng: random.Random) -> list[Draft]:
    p = rng.choice((w.people[0], w.people[2], w.people[6]))
    return [
        Draft(
            "bank_add_payee",
            f"Add {p.name} as a payee with the IBAN {p.iban}.",
            ("bank",),
            "state",
            (exists("bank", "payees", name=p.name, iban=p.iban),),
            (
                Open("bank"),
                Click("payees"),
                Click("new-payee"),
                Type("name", p.name),
                Type("iban", p.iban),
                Click("add-payee"),
            ),
        )
    ]


# -- hotel --------------------------------------------------------------------------------------------------------
def book_hotel(
    city: str, check_in: str, check_out: str, pick: Callable[..., str] = cheapest
) -> tuple[Step, ...]:
    """Search stays (``{var}`` allowed), pick a hotel row, book it under the prefilled guest name."""
    return (
        Open("hotel"),
        Type("city", city),
        Type("check_in", check_in),
        Type("check_out", check_out),
        Click("search"),
        ClickRow("hotel-", pick),
        Click("book"),
    )


def shift_day(date: str, days: int) -> str:
    """``date`` (YYYY-MM-DD) moved by ``days``."""
    return (datetime.date.fromisoformat(date) + datetime.timedelta(days=days)).isoformat()


@template("hotel_cheapest", ("hotel",))
def hotel_cheapest(w: World, rng: random.Random) -> list[Draft]:
    d1 = f"2026-12-{rng.randrange(5, 20):02d}"
    nights = rng.randrange(1, 4)
    d2 = shift_day(d1, nights)
    best = min((h for h in w.hotels if h["city"] == w.city), key=lambda h: h["price"])
    if best["rooms"] < 1:
        return []
    return [
        Draft(
            "hotel_cheapest",
            f"Book the cheapest hotel in {w.city}, checking in on {d1} and out on {d2}.",
            ("hotel",),
            "state",
            (exists("hotel", "bookings", hotel=best["id"], check_in=d1, check_out=d2, status="booked"),),
            book_hotel(w.city, d1, d2),
        )
    ]


# -- food and ride -------------------------------------------------------------------------------------------------
@template("food_order", ("food",))
def food_order(w: World, rng: random.Random) -> list[Draft]:
    # Worlds seed only the delivery address: the restaurants and menus are the food app's own default seed.
    r = rng.choice(sorted(FoodApp.default_seed()["restaurants"], key=lambda r: r["name"]))
    rname, rid = r["name"], r["id"]
    menu = rng.choice(r["menu"])
    item_id, item = menu["id"], menu["name"]
    tip = rng.choice(("0", "2", "5"))
    return [
        Draft(
            "food_order",
            f"Order one {item} from {rname} to {w.home_address} with a {tip} EUR tip.",
            ("food",),
            "state",
            (
                exists(
                    "food", "orders", restaurant=rid, items={item_id: 1}, tip=int(tip), address=w.home_address
                ),
            ),
            (
                Open("food"),
                ClickText("restaurant-", rname),
                ClickRow("add-", lambda rows, env, item=item: next((i for i, r in rows if item in r), "")),
                Click("view-cart"),
                Click("checkout"),
                Type("address", w.home_address),
                Click(f"tip-{tip}"),
                Click("place-order"),
                Click("place-yes"),
            ),
        )
    ]


def request_ride(pickup: str, destination: str, kind: str) -> tuple[Step, ...]:
    """Request a ride between two saved places (``{var}`` allowed)."""
    return (
        Open("ride"),
        Type("pickup", pickup),
        Type("destination", destination),
        Click("see-prices"),
        ClickText("type-", kind),
        Click("request"),
        Click("confirm-ride-yes"),
    )


@template("ride_request", ("ride",))
def ride_request(w: World, rng: random.Random) -> list[Draft]:
    a, b = rng.sample([p[0] for p in w.places()], 2)
    kind = rng.choice(("Economy", "Comfort", "XL"))
    return [
        Draft(
            "ride_request",
            f"Request a {kind} ride from {a} to {b}.",
            ("ride",),
            "state",
            (exists("ride", "rides", pickup=a, destination=b, type=kind.lower(), status="requested"),),
            request_ride(a, b, kind),
        )
    ]
