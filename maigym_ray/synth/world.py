"""World generation: one seeded persona and scenario become one coherent set of facts, and seeds for every app.

A :class:`World` is the single source of truth for a batch of tasks: the people, the main event and the other
events, the trip (trains and hotels), the money owed, the messages that mention all of these, and the
records of the novel apps. :meth:`World.seeds` writes those facts into each app's seed format, so the same
person, date or amount appears in the mail, the calendar, the contacts, the bank and the bookings apps.
Templates (:mod:`maigym_ray.synth.templates`) read facts from the World to phrase a task and its verifier; the
planner reads the rendered screens, never these facts.

``make_world(seed)`` is a pure function of ``seed``: the same seed gives the same world, byte for byte
(:meth:`World.to_json`), whatever the Python hash seed or platform.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from typing import Any

TODAY = "2026-12-01"

FIRST = (
    "Alice Anna Ben Carla David Elena Felix Greta Hannah Ivan Julia Karim Lena Marco Nina Oscar Paula Rafael "
    "Sofia Tobias Uma Victor Wanda Yusuf Zoe Amir Bianca Chiara Daniel Emil Farah Georg Helga Ines Jonas Kira"
).split()
LAST = (
    "Berg Costa Dietrich Engel Fischer Gomez Hartmann Ivanova Jansen Keller Lange Moreau Novak Ortega Petrov "
    "Quinn Richter Schmidt Tanaka Ueda Vogel Weber Yilmaz Zimmer Albers Brandt Claes Dorn Eder Falk"
).split()
#: Last names with a near twin (the distractor: "Anna Berg" and "Anna Bergmann").
TWINS = {"Berg": "Bergmann", "Lange": "Langer", "Vogel": "Vogler", "Keller": "Kellner", "Engel": "Engels"}
COMPANIES = (
    "Northwind Logistics, Bluefin Analytics, Kestrel Design, Atlas Robotics, Lindqvist Law, Meridian Health, "
    "Orchard Foods, Polar Energy, Quarry Media, Redwood Capital, Sable Systems, Tidewater Labs"
).split(", ")
CITIES = ("Berlin", "Munich", "Hamburg", "Cologne", "Frankfurt", "Leipzig", "Stuttgart", "Dresden", "Hanover")
STREETS = (
    "Linden Road",
    "Market Square",
    "River Street",
    "Castle Lane",
    "Harbour Way",
    "Garden Row",
    "Mill Street",
)
HOTEL_NAMES = (
    "Astoria",
    "Parkhotel",
    "Hotel Lindenhof",
    "City Inn",
    "Grand Central",
    "Rosegarden",
    "Harbour Lodge",
)
TIMES = ("09:00", "09:30", "10:00", "11:00", "13:30", "14:00", "15:00", "16:30")
SHOPS = (
    "Nordwind Books",
    "Lumen Electronics",
    "Petal & Pot",
    "Trailhead Outdoor",
    "Kitchenette",
    "Paperworks",
)
BOOKS = (
    ("The Silent River", "Mara Lind", 2019),
    ("Glass Cities", "Jon Avery", 2021),
    ("A Short History of Trains", "Ute Brenner", 2015),
    ("Winter Recipes", "Paolo Greco", 2020),
    ("The Quiet Engineer", "Sana Mir", 2022),
    ("Maps of the North", "Erik Dahl", 2017),
    ("Night Garden", "Lea Sommer", 2023),
    ("Numbers for Everyone", "Tom Hale", 2018),
    ("The River Keeper", "Mara Lind", 2024),
    ("Salt and Stone", "Ines Faro", 2016),
)
PLANTS = (
    ("Monstera", "Monstera deliciosa"),
    ("Fern", "Nephrolepis exaltata"),
    ("Basil", "Ocimum basilicum"),
    ("Fiddle fig", "Ficus lyrata"),
    ("Snake plant", "Dracaena trifasciata"),
    ("Orchid", "Phalaenopsis"),
    ("Aloe", "Aloe vera"),
    ("Rosemary", "Salvia rosmarinus"),
)
ROOMS = ("Living room", "Kitchen", "Bedroom", "Office", "Balcony")

#: scenario -> (main event title pattern, location pattern, what the money was for, note title)
SCENARIOS: dict[str, tuple[str, str, str, str]] = {
    "business_trip": (
        "Client meeting with {company}",
        "{company} office, {street}",
        "the taxi",
        "Trip checklist",
    ),
    "team_offsite": (
        "Team offsite kickoff",
        "Loft {n}, {street}",
        "the offsite venue deposit",
        "Offsite agenda",
    ),
    "family_event": (
        "{relative}'s birthday dinner",
        "Trattoria Sole, {street}",
        "the birthday present",
        "Gift ideas",
    ),
    "conference": (
        "Data Summit keynote",
        "Congress Hall {n}, {street}",
        "the conference ticket",
        "Talks to see",
    ),
    "moving_house": ("Key handover", "{n} {street}", "the moving van", "Moving checklist"),
    "wedding": (
        "{relative}'s wedding ceremony",
        "St. Mary's Chapel, {street}",
        "the wedding gift",
        "Wedding plan",
    ),
}
RELATIVES = ("Aunt Rosa", "Grandpa Karl", "Cousin Mia", "Uncle Theo", "Sister Lea")


@dataclass(frozen=True)
class Person:
    """Someone in the persona's life; ``iban`` is where money to them goes."""

    first: str
    last: str
    email: str
    phone: str
    company: str
    iban: str

    @property
    def name(self) -> str:
        """First and last name."""
        return f"{self.first} {self.last}"


@dataclass(frozen=True)
class Event:
    """A dated event; ``organiser`` indexes ``World.people``."""

    title: str
    date: str
    start: str
    end: str
    location: str
    organiser: int


@dataclass(frozen=True)
class Train:
    """One train of the trip."""

    id: str
    frm: str
    to: str
    date: str
    dep: str
    arr: str
    economy: float
    first: float


@dataclass(frozen=True)
class World:
    """One coherent world. Every field is plain data; :meth:`seeds` renders it into the apps' seed formats."""

    seed: int
    scenario: str
    me: Person
    home_city: str
    city: str
    #: roles by position: [0] organises the main event, [1] asked for money (and a payee), [2] moved house,
    #: [3] is [0]'s near-name twin (same first name, a near last name), [4:] friends and payees.
    people: tuple[Person, ...]
    main: Event
    events: tuple[Event, ...]  # the calendar's events (the main one is only in the mail)
    visit: Event  # a calendar event in ``city`` that needs a hotel night
    trains: tuple[Train, ...]
    hotels: tuple[dict[str, Any], ...]
    owed: float
    owed_for: str
    new_address: str
    locker_hint: str  # the locker people[1] asks the parcel to go to
    notes: tuple[dict[str, Any], ...]
    transactions: tuple[dict[str, Any], ...]
    parcels: tuple[dict[str, Any], ...]
    lockers: tuple[dict[str, Any], ...]
    books: tuple[dict[str, Any], ...]
    loans: tuple[dict[str, Any], ...]
    plants: tuple[dict[str, Any], ...]
    balance: float
    home_address: str

    def to_json(self) -> str:
        """Canonical JSON of every fact (the determinism check compares these bytes)."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    # -- app seeds --------------------------------------------------------------------------------------------
    def messages(self) -> list[dict[str, Any]]:
        """The mailbox: the invitation, the money request, the new address, the locker note, distractors."""
        org, owed_to, mover, twin = self.people[0], self.people[1], self.people[2], self.people[3]
        m = self.main
        rows = [
            (
                org,
                m.title,
                f"Hi {self.me.first}, {m.title} is on {m.date} at {m.start} at {m.location}. "
                f"See you there! {org.first}",
                "2026-11-24",
            ),
            (
                owed_to,
                f"Money for {self.owed_for}",
                f"Hi {self.me.first}, could you send me {self.owed:.2f} EUR for {self.owed_for}? "
                f"My IBAN is {owed_to.iban}. Thanks, {owed_to.first}",
                "2026-11-26",
            ),
            (
                mover,
                "My new address",
                f"Hi {self.me.first}, I moved! My new address is {self.new_address}. {mover.first}",
                "2026-11-23",
            ),
            (
                owed_to,
                "Parcel for me",
                f"If my parcel comes to you, please send it to {self.locker_hint}. {owed_to.first}",
                "2026-11-27",
            ),
            (
                twin,
                f"Re: {self.events[0].title}",
                f"Can we move it? I am free on {self.events[0].date}. {twin.first}",
                "2026-11-25",
            ),
            (
                Person("Deals", "", "news@shop.example", "", "", ""),
                "Weekly deals newsletter",
                "Big savings this week!",
                "2026-11-28",
            ),
        ]
        return [
            {
                "id": f"m{i}",
                "folder": "inbox",
                "from": p.email,
                "to": self.me.email,
                "subject": subj,
                "body": body,
                "date": date,
                "read": False,
                "starred": False,
            }
            for i, (p, subj, body, date) in enumerate(rows, start=1)
        ]

    def seeds(self) -> dict[str, dict[str, Any]]:
        """Each app's seed, written from the same facts."""
        ev = [self.visit, *self.events]
        return {
            "mail": {"me": self.me.email, "messages": self.messages()},
            "calendar": {
                "events": [
                    {
                        "id": f"e{i}",
                        "title": e.title,
                        "date": e.date,
                        "start": e.start,
                        "end": e.end,
                        "location": e.location,
                        "attendees": [self.people[e.organiser].email],
                    }
                    for i, e in enumerate(ev, start=1)
                ]
            },
            "contacts": {
                "contacts": [
                    {
                        "id": f"c{i}",
                        "name": p.name,
                        "phone": p.phone,
                        "email": p.email,
                        "company": p.company,
                        "favorite": i == 2,
                    }
                    for i, p in enumerate(self.people, start=1)
                ]
            },
            "train": {
                "stations": sorted({self.home_city, self.city, *CITIES[:5]}),
                "trains": [
                    {
                        "id": t.id,
                        "from": t.frm,
                        "to": t.to,
                        "date": t.date,
                        "dep": t.dep,
                        "arr": t.arr,
                        "prices": {"economy": t.economy, "first": t.first},
                        "seats": 40,
                    }
                    for t in self.trains
                ],
                "bookings": [],
                "traveller": self.me.name,
            },
            "hotel": {"guest": self.me.name, "hotels": [dict(h) for h in self.hotels], "bookings": []},
            "bank": {
                "owner": self.me.name,
                "balance": self.balance,
                "payees": [
                    {"id": f"p{i}", "name": p.name, "iban": p.iban}
                    for i, p in enumerate((self.people[1], self.people[4], self.people[5]), start=1)
                ],
                "transactions": [dict(t) for t in self.transactions],
            },
            "notes": {"notes": [dict(n) for n in self.notes]},
            "parcel": {
                "parcels": [dict(p) for p in self.parcels],
                "lockers": [dict(lk) for lk in self.lockers],
            },
            "library": {
                "member": self.me.name,
                "books": [dict(b) for b in self.books],
                "loans": [dict(ln) for ln in self.loans],
                "holds": [],
            },
            "plants": {"plants": [dict(p) for p in self.plants], "log": []},
            "food": {"address": self.home_address},
            "ride": {"places": [{"name": n, "address": a, "x": x, "y": y} for n, a, x, y in self.places()]},
        }

    def places(self) -> list[tuple[str, str, float, float]]:
        """The ride app's saved places: home, and the places the calendar's events happen at."""
        return [
            ("Home", self.home_address, 0.0, 0.0),
            ("Office", f"5 {STREETS[1]}", 3.0, 4.0),
            ("Central Station", "1 Station Place", 6.0, 8.0),
            ("City Gym", f"88 {STREETS[2]}", 1.0, 2.0),
            ("Cafe Luna", f"17 {STREETS[3]}", 2.0, 5.0),
            ("Airport", "Terminal 1", 12.0, 16.0),
        ]


def _date(day: int) -> str:
    return f"2026-12-{day:02d}"


def _add_minutes(hhmm: str, minutes: int) -> str:
    h, m = map(int, hhmm.split(":"))
    t = h * 60 + m + minutes
    return f"{t // 60:02d}:{t % 60:02d}"


def _iban(rng: random.Random) -> str:
    return "DE" + "".join(str(rng.randrange(10)) for _ in range(20))


def _phone(rng: random.Random) -> str:
    return f"+49 1{rng.randrange(50, 80)} {rng.randrange(1000000, 9999999)}"


def _train_id(rng: random.Random, used: set[str], prefix: str = "") -> str:
    tid = f"{prefix or rng.choice(('ICE', 'IC'))}{rng.randrange(100, 999)}"
    while tid in used:
        tid = f"ICE{rng.randrange(100, 999)}"
    used.add(tid)
    return tid


def _people(rng: random.Random, me_first: str) -> tuple[Person, ...]:
    firsts = rng.sample([f for f in FIRST if f != me_first], 7)
    lasts = rng.sample(list(TWINS), 1) + rng.sample([n for n in LAST if n not in TWINS], 6)
    out = []
    for i, (f, last) in enumerate(zip(firsts, lasts, strict=True)):
        if i == 3:  # the twin: same first name as the organiser, a near last name
            f, last = firsts[0], TWINS[lasts[0]]
        email = f"{f.lower()}.{last.lower()}@example.com"
        out.append(Person(f, last, email, _phone(rng), rng.choice(COMPANIES), _iban(rng)))
    return tuple(out)


def make_world(seed: int) -> World:
    """The world of ``seed`` (deterministic: a private ``random.Random(seed)`` drives every choice)."""
    rng = random.Random(seed)
    scenario = rng.choice(sorted(SCENARIOS))
    me_first = rng.choice(FIRST)
    me = Person(me_first, rng.choice(LAST), f"{me_first.lower()}@example.com", _phone(rng), "", _iban(rng))
    people = _people(rng, me_first)
    home_city, city = rng.sample(CITIES, 2)
    title_p, loc_p, owed_for, note_title = SCENARIOS[scenario]
    fmt = {
        "company": people[0].company,
        "street": rng.choice(STREETS),
        "n": rng.randrange(2, 60),
        "relative": rng.choice(RELATIVES),
    }
    day = rng.randrange(3, 15)
    start = rng.choice(TIMES[2:])
    main = Event(title_p.format(**fmt), _date(day), start, _add_minutes(start, 90), loc_p.format(**fmt), 0)

    other_titles = ("Dentist", "Gym", "1:1 with {p}", "Lunch with {p}", "Yoga class", "Project review")
    events = []
    for k, t in enumerate(rng.sample(other_titles, 4)):
        d, s = rng.randrange(2, 20), rng.choice(TIMES)
        org = 4 + k % 3
        events.append(
            Event(
                t.format(p=people[org].first),
                _date(d),
                s,
                _add_minutes(s, 60),
                rng.choice(("Room 2A", "City Gym", "Cafe Luna", "Room 1C")),
                org,
            )
        )
    vday = rng.randrange(3, 20)
    visit = Event(f"{city} site visit", _date(vday), "10:00", "16:00", f"{city} plant", 5)

    # Trains home -> city on the main day: two or more arrive before the event starts, one after.
    trains, used = [], set()
    for dep_h in sorted(rng.sample(range(5, 13), 5)):
        dur = rng.randrange(150, 300)
        dep = f"{dep_h:02d}:{rng.choice((0, 15, 30, 45)):02d}"
        tid = _train_id(rng, used)
        eco = float(rng.randrange(29, 99))
        trains.append(Train(tid, home_city, city, main.date, dep, _add_minutes(dep, dur), eco, eco + 40))
    if sum(t.arr < main.start for t in trains) < 2:  # make the "arrives before" choice a real choice
        h, mnt = map(int, sorted(t.arr for t in trains)[1].split(":"))
        slot = (h * 60 + mnt) // 30 * 30 + 60  # the next half hour after the second arrival, plus 30 min
        start = f"{slot // 60:02d}:{slot % 60:02d}"
        main = Event(main.title, main.date, start, _add_minutes(start, 90), main.location, 0)
    for k in range(2):  # the way back the next day, and a near-date distractor
        tid = _train_id(rng, used, "ICE")
        eco = float(rng.randrange(29, 99))
        frm, to, d = (city, home_city, _date(day + 1)) if k == 0 else (home_city, city, _date(day + 1))
        trains.append(Train(tid, frm, to, d, "17:00", "21:10", eco, eco + 40))

    hotels = []
    for i, name in enumerate(rng.sample(HOTEL_NAMES, 5), start=1):
        hcity = city if i <= 4 else home_city
        hotels.append(
            {
                "id": f"h{i}",
                "name": f"{name} {hcity}" if name != "Parkhotel" else f"Parkhotel {hcity}",
                "city": hcity,
                "price": float(rng.randrange(65, 220)),
                "rating": round(rng.uniform(3.2, 4.9), 1),
                "rooms": rng.randrange(1, 6),
            }
        )
    prices = [h["price"] for h in hotels if h["city"] == city]
    if len(set(prices)) < len(prices):  # a unique cheapest hotel
        for j, h in enumerate(hotels):
            h["price"] = float(h["price"] + j)

    owed = round(rng.randrange(1500, 15000) / 100, 2)
    new_address = f"{rng.randrange(1, 99)} {rng.choice(STREETS)}, {rng.choice(CITIES)}"
    lockers = tuple(
        {"id": f"L{i}", "name": f"Locker {n}", "address": f"{rng.randrange(1, 90)} {rng.choice(STREETS)}"}
        for i, n in enumerate(("Central Station", "Central Market", "Old Town", "Harbour"), start=1)
    )
    locker_hint = rng.choice(lockers)["name"]
    notes = (
        {
            "id": "n1",
            "title": note_title,
            "body": f"{main.title} on {main.date} at {main.start}.",
            "pinned": True,
            "updated": "2026-11-20",
        },
        {
            "id": "n2",
            "title": "Door code",
            "body": f"The door code is {rng.randrange(1000, 9999)}.",
            "pinned": False,
            "updated": "2026-11-18",
        },
        {
            "id": "n3",
            "title": "Budget",
            "body": f"December budget: {rng.randrange(300, 900)} EUR.",
            "pinned": False,
            "updated": "2026-11-22",
        },
        {
            "id": "n4",
            "title": "Books to read",
            "body": ", ".join(b[0] for b in rng.sample(BOOKS, 3)),
            "pinned": False,
            "updated": "2026-11-10",
        },
    )
    tx = []
    for i in range(6):
        p = people[(i + 4) % len(people)]
        tx.append(
            {
                "id": f"t{i + 1}",
                "date": f"2026-11-{rng.randrange(2, 29):02d}",
                "counterparty": p.name,
                "amount": -round(rng.randrange(500, 9000) / 100, 2),
                "reference": rng.choice(
                    ("Dinner", "Concert tickets", "Rent share", "Groceries", "Books", "Train tickets")
                ),
            }
        )
    tx.sort(key=lambda t: (t["date"], t["id"]))
    parcels = []
    for i, shop in enumerate([*rng.sample(SHOPS, 3), people[1].name, people[4].name], start=1):
        parcels.append(
            {
                "id": f"P{i}",
                "tracking": f"PK{rng.randrange(10**7, 10**8)}",
                "sender": shop,
                "status": rng.choice(("in transit", "out for delivery")) if i != 3 else "delivered",
                "eta": _date(rng.randrange(2, 9)),
                "locker": "",
                "note": "",
            }
        )
    books = tuple(
        {"id": f"b{i}", "title": t, "author": a, "year": y, "copies": rng.randrange(0, 3) if i > 2 else 1}
        for i, (t, a, y) in enumerate(rng.sample(BOOKS, 8), start=1)
    )
    loans = (
        {
            "id": "L1",
            "book": books[0]["id"],
            "title": books[0]["title"],
            "due": _date(rng.randrange(4, 15)),
            "renewals": 0,
            "status": "active",
        },
        {
            "id": "L2",
            "book": books[1]["id"],
            "title": books[1]["title"],
            "due": _date(rng.randrange(4, 15)),
            "renewals": 1,
            "status": "active",
        },
    )
    plants = tuple(
        {
            "id": f"pl{i}",
            "name": name,
            "species": species,
            "room": rng.choice(ROOMS),
            "every_days": rng.choice((3, 5, 7, 10, 14)),
            "last_watered": f"2026-11-{rng.randrange(15, 30):02d}",
        }
        for i, (name, species) in enumerate(rng.sample(PLANTS, 5), start=1)
    )
    return World(
        seed=seed,
        scenario=scenario,
        me=me,
        home_city=home_city,
        city=city,
        people=people,
        main=main,
        events=tuple(events),
        visit=visit,
        trains=tuple(trains),
        hotels=tuple(hotels),
        owed=owed,
        owed_for=owed_for,
        new_address=new_address,
        locker_hint=locker_hint,
        notes=notes,
        transactions=tuple(tx),
        parcels=tuple(parcels),
        lockers=lockers,
        books=books,
        loans=loans,
        plants=plants,
        balance=float(rng.randrange(1200, 4000)),
        home_address=f"{rng.randrange(1, 99)} {rng.choice(STREETS)}",
    )
