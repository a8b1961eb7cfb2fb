"""Task templates: each turns a :class:`~maigym_ray.synth.world.World` into drafts of tasks.

A draft holds the instruction, the apps, the verifier (``checks``, written from the world's facts) and the plan
(written from the task's wording, in screen terms, for :mod:`maigym_ray.synth.planner`). The two never share a
value that the task asks the agent to find: an information task's answer is in the checks, and the plan reads
it off the screen; a choice ("the latest train that arrives in time") is computed from facts for the checks
and made over the screen's rows by the plan. Validation then proves they agree, on a live instance.

Single-app templates live here; cross-app ones in :mod:`maigym_ray.synth.cross_app`. Both register with
:func:`template`; ``TEMPLATES`` maps name to (function, apps).
"""

from __future__ import annotations

import datetime
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from maigym_ray.apps.food import FoodApp
from maigym_ray.synth.planner import Answer, Click, ClickRow, ClickText, Open, Read, Step, Type
from maigym_ray.synth.world import World


@dataclass(frozen=True)
class Draft:
    """One task before planning and validation."""

    template: str
    instruction: str
    apps: tuple[str, ...]  # the first is where the task starts
    kind: str  # "info" (answered with ``answer``) or "state" (changes app state)
    checks: tuple[dict[str, Any], ...]
    plan: tuple[Step, ...]
    #: overrides for world-independent templates (the debug curriculum): the task id, its own app seeds and
    #: its split. Empty: ``<template>-w<world>-<k>``, the world's seeds, the split by world and app.
    task_id: str = ""
    seeds: dict[str, Any] | None = None
    split: str = ""
    tags: tuple[str, ...] = ()
    max_steps: int = 0  # 0: twice the golden solution's length plus 2, at least 8
    #: a whole verifier spec instead of ``checks`` (e.g. a hand-written, jailed ``code`` verifier).
    verifier: dict[str, Any] | None = None


TemplateFn = Callable[[World, random.Random], list[Draft]]
#: name -> (function, apps it touches)
TEMPLATES: dict[str, tuple[TemplateFn, tuple[str, ...]]] = {}
#: the templates a synthesis run uses when it names none (world-independent ones are left out)
DEFAULT_TEMPLATES: list[str] = []


def template(name: str, apps: tuple[str, ...], default: bool = True) -> Callable[[TemplateFn], TemplateFn]:
    """Registers a template under ``name``; ``apps`` are the apps its tasks touch (first = start app)."""

    def deco(fn: TemplateFn) -> TemplateFn:
        TEMPLATES[name] = (fn, apps)
        if default:
            DEFAULT_TEMPLATES.append(name)
        return fn

    return deco


# -- verifier checks and row choices ------------------------------------------------------------------------------
def exists(app: str, path: str, **match: Any) -> dict[str, Any]:
    """A check: some record of ``app.path`` matches."""
    return {"op": "exists", "app": app, "path": path, "match": match}


def absent(app: str, path: str, **match: Any) -> dict[str, Any]:
    """A check: no record of ``app.path`` matches."""
    return {"op": "absent", "app": app, "path": path, "match": match}


def answer(*any_of: str, numeric: bool = False) -> dict[str, Any]:
    """A check on the agent's answer."""
    return {"op": "answer", "any_of": list(any_of), "numeric": numeric}


def times(text: str) -> list[str]:
    """The HH:MM times in a row, in order."""
    return re.findall(r"\b\d\d:\d\d\b", text)


def price(text: str) -> float:
    """The first euro amount in a row."""
    m = re.search(r"€\s*([\d.]+)", text)
    return float(m.group(1)) if m else float("inf")


def cheapest(rows: list[tuple[str, str]], env: dict[str, str]) -> str:
    """The row with the lowest euro amount."""
    return min(rows, key=lambda r: price(r[1]))[0] if rows else ""


def _d(drafts: list[Draft | None]) -> list[Draft]:
    return [d for d in drafts if d is not None]


# -- contacts -----------------------------------------------------------------------------------------------------
def find_contact(name: str, search: str) -> tuple[Step, ...]:
    """Search the contacts for ``search`` and open the one named ``name``."""
    return (Open("contacts"), Type("search-box", search), Click("search"), ClickText("contact-", name))


@template("contacts_phone", ("contacts",))
def contacts_phone(w: World, rng: random.Random) -> list[Draft]:
    out = []
    for p in (w.people[3], rng.choice(w.people[4:])):
        out.append(
            Draft(
                "contacts_phone",
                f"What is {p.name}'s phone number?",
                ("contacts",),
                "info",
                (answer(p.phone),),
                (*find_contact(p.name, p.last), Read(r"Phone: (.+)", ("phone",)), Answer("{phone}")),
            )
        )
    return out


@template("contacts_favorite", ("contacts",))
def contacts_favorite(w: World, rng: random.Random) -> list[Draft]:
    p = rng.choice([w.people[0], *w.people[2:]])
    return [
        Draft(
            "contacts_favorite",
            f"Add {p.name} to your favourite contacts.",
            ("contacts",),
            "state",
            (exists("contacts", "contacts", name=p.name, favorite=True),),
            (*find_contact(p.name, p.first), Click("favorite")),
        )
    ]


@template("contacts_add", ("contacts",))
def contacts_add(w: World, rng: random.Random) -> list[Draft]:
    first, last = rng.choice(("Maren", "Jakob", "Selin", "Piotr")), rng.choice(("Holm", "Wendt", "Sauer"))
    phone, email = f"+49 170 {rng.randrange(1000000, 9999999)}", f"{first.lower()}.{last.lower()}@example.org"
    return [
        Draft(
            "contacts_add",
            f"Save a new contact: {first} {last}, phone {phone}, email {email}.",
            ("contacts",),
            "state",
            (exists("contacts", "contacts", name=f"{first} {last}", phone=phone, email=email),),
            (
                Open("contacts"),
                Click("new-contact"),
                Type("name", f"{first} {last}"),
                Type("phone", phone),
                Type("email", email),
                Click("save"),
            ),
        )
    ]


# -- mail ---------------------------------------------------------------------------------------------------------
def compose(to: str, subject: str, body: str) -> tuple[Step, ...]:
    """Write and send a new email (``{var}`` allowed in each field)."""
    return (
        Open("mail"),
        Click("compose"),
        Type("to", to),
        Type("subject", subject),
        Type("body", body),
        Click("send"),
    )


@template("mail_send", ("mail",))
def mail_send(w: World, rng: random.Random) -> list[Draft]:
    p = rng.choice(w.people[4:])
    subject = rng.choice(("Quick question", "Lunch next week", "Photos", "Thanks!"))
    body = rng.choice(("Are you free on Friday?", "Here are the photos.", "Thanks for your help."))
    return [
        Draft(
            "mail_send",
            f"Email {p.email} with the subject {subject} and the message: {body}",
            ("mail",),
            "state",
            (
                exists(
                    "mail", "messages", folder="sent", to=p.email, subject=subject, body={"$contains": body}
                ),
            ),
            compose(p.email, subject, body),
        )
    ]


@template("mail_archive", ("mail",))
def mail_archive(w: World, rng: random.Random) -> list[Draft]:
    msgs = w.messages()
    m = rng.choice(msgs[1:3] + msgs[4:])
    return [
        Draft(
            "mail_archive",
            f"Archive the email with the subject \u201c{m['subject']}\u201d.",
            ("mail",),
            "state",
            (exists("mail", "messages", id=m["id"], folder="archive"),),
            (Open("mail"), ClickText("msg-", m["subject"]), Click("archive")),
        )
    ]


@template("mail_time", ("mail",))
def mail_time(w: World, rng: random.Random) -> list[Draft]:
    org = w.people[0]
    return [
        Draft(
            "mail_time",
            f"According to {org.first}'s email, at what time does {w.main.title} start? Answer with HH:MM.",
            ("mail",),
            "info",
            (answer(w.main.start),),
            (Open("mail"), ClickText("msg-", w.main.title), Read(r" at (\d\d:\d\d) ", ("t",)), Answer("{t}")),
        )
    ]


# -- calendar -----------------------------------------------------------------------------------------------------
def new_event(title: str, date: str, start: str, end: str) -> tuple[Step, ...]:
    """Create a calendar event (``{var}`` allowed)."""
    return (
        Open("calendar"),
        Click("new-event"),
        Type("title", title),
        Type("date", date),
        Type("start", start),
        Type("end", end),
        Click("save"),
    )


@template("calendar_create", ("calendar",))
def calendar_create(w: World, rng: random.Random) -> list[Draft]:
    title = rng.choice(("Haircut", "Call with the bank", "Pick up dry cleaning", "Piano lesson"))
    day, hour = rng.randrange(2, 28), rng.randrange(8, 18)
    date, start, end = f"2026-12-{day:02d}", f"{hour:02d}:00", f"{hour:02d}:45"
    return [
        Draft(
            "calendar_create",
            f"Add \u201c{title}\u201d to your calendar on {date} from {start} to {end}.",
            ("calendar",),
            "state",
            (exists("calendar", "events", title=title, date=date, start=start, end=end),),
            new_event(title, date, start, end),
        )
    ]


@template("calendar_delete", ("calendar",))
def calendar_delete(w: World, rng: random.Random) -> list[Draft]:
    e = rng.choice(w.events)
    return [
        Draft(
            "calendar_delete",
            f"Delete \u201c{e.title}\u201d on {e.date} from your calendar.",
            ("calendar",),
            "state",
            (absent("calendar", "events", title=e.title, date=e.date),),
            (Open("calendar"), ClickText("event-", e.title), Click("delete"), Click("delete-yes")),
        )
    ]


@template("calendar_where", ("calendar",))
def calendar_where(w: World, rng: random.Random) -> list[Draft]:
    e = rng.choice(w.events)
    return [
        Draft(
            "calendar_where",
            f"Where does \u201c{e.title}\u201d on {e.date} take place?",
            ("calendar",),
            "info",
            (answer(e.location),),
            (
                Open("calendar"),
                ClickText("event-", e.title),
                Read(r"(?:Location|Where): ([^\n]+)", ("loc",)),
                Answer("{loc}"),
            ),
        )
    ]


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


# -- notes --------------------------------------------------------------------------------------------------------
@template("notes_create", ("notes",))
def notes_create(w: World, rng: random.Random) -> list[Draft]:
    title = rng.choice(("Call the landlord", "Ideas for the weekend", "Shopping", "Questions for the doctor"))
    body = rng.choice(
        ("Ask about the heating.", "Visit the museum.", "Milk, eggs, bread.", "Sleep and diet.")
    )
    return [
        Draft(
            "notes_create",
            f"Create a note titled \u201c{title}\u201d with the text: {body}",
            ("notes",),
            "state",
            (exists("notes", "notes", title=title, body={"$contains": body}),),
            (Open("notes"), Click("new-note"), Type("title", title), Type("body", body), Click("create")),
        )
    ]


@template("notes_lookup", ("notes",))
def notes_lookup(w: World, rng: random.Random) -> list[Draft]:
    code = re.search(r"\d{4}", w.notes[1]["body"]).group(0)  # type: ignore[union-attr]
    budget = re.search(r"(\d+) EUR", w.notes[2]["body"]).group(1)  # type: ignore[union-attr]
    return [
        rng.choice(
            [
                Draft(
                    "notes_lookup",
                    "What is the door code written in your notes?",
                    ("notes",),
                    "info",
                    (answer(code, numeric=True),),
                    (
                        Open("notes"),
                        ClickText("note-", "Door code"),
                        Read(r"door code is (\d+)", ("c",)),
                        Answer("{c}"),
                    ),
                ),
                Draft(
                    "notes_lookup",
                    "How many euros is your December budget, according to your notes?",
                    ("notes",),
                    "info",
                    (answer(budget, numeric=True),),
                    (
                        Open("notes"),
                        ClickText("note-", "Budget"),
                        Read(r"budget: (\d+) EUR", ("b",)),
                        Answer("{b}"),
                    ),
                ),
            ]
        )
    ]


@template("notes_pin", ("notes",))
def notes_pin(w: World, rng: random.Random) -> list[Draft]:
    n = rng.choice(w.notes[1:])
    return [
        Draft(
            "notes_pin",
            f"Pin the note \u201c{n['title']}\u201d.",
            ("notes",),
            "state",
            (exists("notes", "notes", id=n["id"], pinned=True),),
            (Open("notes"), ClickText("note-", n["title"]), Click("pin")),
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


# -- novel apps (the ood_app split) ---------------------------------------------------------------------------------
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
