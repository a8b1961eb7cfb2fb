"""Single-app templates over the personal-information apps: contacts, mail, calendar and notes.

Each phrases a task from the world's people and facts; see :mod:`maigym_ray.synth.templates` for how a
template's checks and plan are kept apart.
"""

from __future__ import annotations

import random
import re

from maigym_ray.synth.drafts import Draft, absent, answer, exists, template
from maigym_ray.synth.planner import Answer, Click, ClickText, Open, Read, Step, Type
from maigym_ray.synth.world import World


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
