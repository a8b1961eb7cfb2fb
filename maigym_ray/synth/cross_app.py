"""Cross-app templates: tasks whose evidence is in one app and whose answer or change is in another.

"Book the train that arrives before the meeting Alice emailed about" needs the meeting time from Post (mail)
and a choice among Rail's results; the plan reads the time off the message screen and picks the row, while the
checks name the train the world's facts imply. Importing this module registers the templates.
"""

from __future__ import annotations

import random

from maigym_ray.synth.drafts import Draft, answer, exists, price, template, times
from maigym_ray.synth.personal_templates import compose, find_contact, new_event
from maigym_ray.synth.planner import Answer, Click, ClickRow, ClickText, Compute, Open, Read, Type
from maigym_ray.synth.service_templates import (
    book_hotel,
    book_train,
    request_ride,
    search_trains,
    shift_day,
    transfer,
)
from maigym_ray.synth.world import World, _add_minutes

#: Reads "<title> is on <date> at <time> at <place>." from the invitation email.
INVITE = (r" is on (2026-\d\d-\d\d) at (\d\d:\d\d) at ([^\n]+?)\. See", ("date", "start", "place"))


def open_message(subject: str) -> tuple:
    """Open Post and the message whose subject shows ``subject``."""
    return (Open("mail"), ClickText("msg-", subject))


def _before(rows: list[tuple[str, str]], env: dict[str, str]) -> str:
    """The latest-departing train that arrives before ``env['start']``."""
    ok = [(times(r)[0], i) for i, r in rows if len(times(r)) >= 2 and times(r)[1] < env["start"]]
    return max(ok)[1] if ok else ""


def _cheapest_before(rows: list[tuple[str, str]], env: dict[str, str]) -> str:
    ok = [(price(r), i) for i, r in rows if len(times(r)) >= 2 and times(r)[1] < env["start"]]
    return min(ok)[1] if ok else ""


@template("x_mail_to_calendar", ("mail", "calendar"))
def mail_to_calendar(w: World, rng: random.Random) -> list[Draft]:
    m = w.main
    return [
        Draft(
            "x_mail_to_calendar",
            f"{w.people[0].first} emailed you about \u201c{m.title}\u201d. Add it to your calendar with that title, "
            "at the date and time in the email, lasting 90 minutes.",
            ("mail", "calendar"),
            "state",
            (exists("calendar", "events", title=m.title, date=m.date, start=m.start, end=m.end),),
            (
                *open_message(m.title),
                Read(*INVITE),
                Compute("end", lambda env: _add_minutes(env["start"], 90)),
                *new_event(m.title, "{date}", "{start}", "{end}"),
            ),
        )
    ]


@template("x_mail_to_train", ("mail", "train"))
def mail_to_train(w: World, rng: random.Random) -> list[Draft]:
    m = w.main
    ok = [t for t in w.trains if t.date == m.date and t.frm == w.home_city and t.arr < m.start]
    if not ok:
        return []
    best = max(ok, key=lambda t: t.dep)
    return [
        Draft(
            "x_mail_to_train",
            f"Book one economy ticket for {w.me.name} on the latest train from {w.home_city} to {w.city} that "
            f"arrives before \u201c{m.title}\u201d starts (the date and time are in {w.people[0].first}'s email).",
            ("mail", "train"),
            "state",
            (exists("train", "bookings", train=best.id, **{"class": "economy"}, status="booked"),),
            (
                *open_message(m.title),
                Read(*INVITE),
                *search_trains(w.home_city, w.city, "{date}"),
                ClickRow("train-", _before),
                *book_train(w.me.name),
            ),
        )
    ]


@template("x_mail_train_price", ("mail", "train"))
def mail_train_price(w: World, rng: random.Random) -> list[Draft]:
    m = w.main
    ok = [t for t in w.trains if t.date == m.date and t.frm == w.home_city and t.arr < m.start]
    if not ok:
        return []
    best = min(ok, key=lambda t: t.economy)
    return [
        Draft(
            "x_mail_train_price",
            f"What is the cheapest economy fare from {w.home_city} to {w.city} on a train that arrives before "
            f"\u201c{m.title}\u201d starts (see {w.people[0].first}'s email)? Answer with the amount in EUR.",
            ("mail", "train"),
            "info",
            (answer(f"{best.economy:.2f}", numeric=True),),
            (
                *open_message(m.title),
                Read(*INVITE),
                *search_trains(w.home_city, w.city, "{date}"),
                ClickRow("train-", _cheapest_before),
                Read(r"Economy €([\d.]+)", ("fare",)),
                Answer("{fare}"),
            ),
        )
    ]


@template("x_contacts_to_mail", ("contacts", "mail"))
def contacts_to_mail(w: World, rng: random.Random) -> list[Draft]:
    out = []
    for p in rng.sample((w.people[0], w.people[2], w.people[3], w.people[5], w.people[6]), 4):
        subject = rng.choice(("Catch-up", "Next steps", "Saturday", "Your book"))
        body = rng.choice(("Shall we talk this week?", "Let me know what you think.", "See you soon."))
        out.append(
            Draft(
                "x_contacts_to_mail",
                f"Email {p.name} (the address is in your contacts) with the subject {subject} and the message: "
                f"{body}",
                ("contacts", "mail"),
                "state",
                (exists("mail", "messages", folder="sent", to=p.email, subject=subject),),
                (
                    *find_contact(p.name, p.last),
                    Read(r"Email: (\S+)", ("email",)),
                    *compose("{email}", subject, body),
                ),
            )
        )
    return out


@template("x_mail_to_bank", ("mail", "bank"))
def mail_to_bank(w: World, rng: random.Random) -> list[Draft]:
    p = w.people[1]
    ref = f"{w.owed_for.replace('the ', '').capitalize()}"
    return [
        Draft(
            "x_mail_to_bank",
            f"{p.first} asked you by email for money for {w.owed_for}. Send {p.name} the amount they asked for, "
            f"with the reference \u201c{ref}\u201d.",
            ("mail", "bank"),
            "state",
            (exists("bank", "transactions", counterparty=p.name, amount=-w.owed, reference=ref),),
            (
                *open_message(f"Money for {w.owed_for}"),
                Read(r"send me ([\d.]+) EUR", ("amount",)),
                *transfer(p.name, "{amount}", ref),
            ),
        )
    ]


@template("x_mail_to_notes", ("mail", "notes"))
def mail_to_notes(w: World, rng: random.Random) -> list[Draft]:
    p = w.people[2]
    title = f"{p.first}'s address"
    return [
        Draft(
            "x_mail_to_notes",
            f"{p.first} emailed you their new address. Save it in a new note titled \u201c{title}\u201d.",
            ("mail", "notes"),
            "state",
            (exists("notes", "notes", title=title, body={"$contains": w.new_address}),),
            (
                *open_message("My new address"),
                Read(r"new address is ([^\n]+?)\. ", ("addr",)),
                Open("notes"),
                Click("new-note"),
                Type("title", title),
                Type("body", "{addr}"),
                Click("create"),
            ),
        )
    ]


def sender_lookup(subject: str, label: str, var: str) -> tuple:
    """Open the email ``subject``, take its sender's name from the address, open that contact, read ``label``."""
    return (
        *open_message(subject),
        Read(r"From ([a-z]+)\.([a-z]+)@", ("first", "last")),
        Compute("name", lambda env: f"{env['first'].capitalize()} {env['last'].capitalize()}"),
        *find_contact("{name}", "{name}"),
        Read(label + r": ([^\n]+)", (var,)),
        Answer("{" + var + "}"),
    )


@template("x_mail_sender_phone", ("mail", "contacts"))
def mail_sender_phone(w: World, rng: random.Random) -> list[Draft]:
    senders = (
        (w.people[0], w.main.title),
        (w.people[2], "My new address"),
        (w.people[1], f"Money for {w.owed_for}"),
    )
    return [
        Draft(
            "x_mail_sender_phone",
            f"What is the phone number of the person who sent you the email \u201c{subject}\u201d?",
            ("mail", "contacts"),
            "info",
            (answer(p.phone),),
            sender_lookup(subject, "Phone", "phone"),
        )
        for p, subject in senders
    ]


@template("x_mail_sender_company", ("mail", "contacts"))
def mail_sender_company(w: World, rng: random.Random) -> list[Draft]:
    senders = ((w.people[1], f"Money for {w.owed_for}"), (w.people[0], w.main.title))
    return [
        Draft(
            "x_mail_sender_company",
            f"Which company does the person who sent you \u201c{subject}\u201d work for?",
            ("mail", "contacts"),
            "info",
            (answer(p.company),),
            sender_lookup(subject, "Company", "company"),
        )
        for p, subject in senders
    ]


@template("x_calendar_to_hotel", ("calendar", "hotel"))
def calendar_to_hotel(w: World, rng: random.Random) -> list[Draft]:
    v = w.visit
    best = min((h for h in w.hotels if h["city"] == w.city), key=lambda h: h["price"])
    if best["rooms"] < 1:
        return []
    return [
        Draft(
            "x_calendar_to_hotel",
            f"Book the cheapest hotel in {w.city} for the night of your \u201c{v.title}\u201d (check in on that "
            "day, check out the next day).",
            ("calendar", "hotel"),
            "state",
            (
                exists(
                    "hotel",
                    "bookings",
                    hotel=best["id"],
                    check_in=v.date,
                    check_out=shift_day(v.date, 1),
                    status="booked",
                ),
            ),
            (
                Open("calendar"),
                ClickText("event-", v.title),
                Read(r"(2026-\d\d-\d\d) ·", ("d1",)),
                Compute("d2", lambda env: shift_day(env["d1"], 1)),
                *book_hotel(w.city, "{d1}", "{d2}"),
            ),
        )
    ]


@template("x_mail_to_hotel", ("mail", "hotel"))
def mail_to_hotel(w: World, rng: random.Random) -> list[Draft]:
    m = w.main
    best = min((h for h in w.hotels if h["city"] == w.city), key=lambda h: h["price"])
    if best["rooms"] < 1:
        return []
    return [
        Draft(
            "x_mail_to_hotel",
            f"Book the cheapest hotel in {w.city} for the night before \u201c{m.title}\u201d (check in the day "
            f"before, check out on the day; {w.people[0].first} emailed you the date).",
            ("mail", "hotel"),
            "state",
            (
                exists(
                    "hotel",
                    "bookings",
                    hotel=best["id"],
                    check_in=shift_day(m.date, -1),
                    check_out=m.date,
                    status="booked",
                ),
            ),
            (
                *open_message(m.title),
                Read(*INVITE),
                Compute("d0", lambda env: shift_day(env["date"], -1)),
                *book_hotel(w.city, "{d0}", "{date}"),
            ),
        )
    ]


@template("x_contacts_to_bank", ("contacts", "bank"))
def contacts_to_bank(w: World, rng: random.Random) -> list[Draft]:
    companies = [p.company for p in w.people]
    payees = [p for p in (w.people[4], w.people[5]) if companies.count(p.company) == 1]
    if not payees:
        return []
    p = rng.choice(payees)
    amount = round(rng.randrange(1000, 6000) / 100, 2)
    return [
        Draft(
            "x_contacts_to_bank",
            f"Transfer {amount:.2f} EUR with the reference \u201cInvoice\u201d to your contact who works at "
            f"{p.company}.",
            ("contacts", "bank"),
            "state",
            (exists("bank", "transactions", counterparty=p.name, amount=-amount, reference="Invoice"),),
            (
                Open("contacts"),
                Type("search-box", p.company),
                Click("search"),
                ClickRow("contact-", lambda rows, env: rows[0][0] if len(rows) == 1 else ""),
                Read(r"\n([^\n]+)\nPhone:", ("name",)),
                *transfer("{name}", f"{amount:.2f}", "Invoice"),
            ),
        )
    ]


@template("x_mail_to_parcel", ("mail", "parcel"))
def mail_to_parcel(w: World, rng: random.Random) -> list[Draft]:
    p = w.people[1]
    parcel = next(x for x in w.parcels if x["sender"] == p.name)
    if parcel["status"] == "delivered":
        return []
    locker = next(lk for lk in w.lockers if lk["name"] == w.locker_hint)
    return [
        Draft(
            "x_mail_to_parcel",
            f"{p.first} emailed you where their parcel should go. Send the parcel from {p.name} to that locker.",
            ("mail", "parcel"),
            "state",
            (exists("parcel", "parcels", id=parcel["id"], locker=locker["id"]),),
            (
                *open_message("Parcel for me"),
                Read(r"send it to (Locker [^.\n]+)\.", ("locker",)),
                Open("parcel"),
                ClickText("parcel-", p.name),
                ClickText("locker-", "{locker}"),
                Click("send-to-locker"),
            ),
        )
    ]


@template("x_calendar_to_ride", ("calendar", "ride"))
def calendar_to_ride(w: World, rng: random.Random) -> list[Draft]:
    saved = {p[0] for p in w.places()}
    events = [e for e in w.events if e.location in saved]
    if not events:
        return []
    e = rng.choice(events)
    return [
        Draft(
            "x_calendar_to_ride",
            f"Request an Economy ride from Home to wherever \u201c{e.title}\u201d on {e.date} takes place.",
            ("calendar", "ride"),
            "state",
            (
                exists(
                    "ride", "rides", pickup="Home", destination=e.location, type="economy", status="requested"
                ),
            ),
            (
                Open("calendar"),
                ClickText("event-", e.title),
                Read(r"Location: ([^\n]+)", ("place",)),
                *request_ride("Home", "{place}", "Economy"),
            ),
        )
    ]
