"""Task families: a family plus an instance seed gives a new, validated task whose content changes every instance.

The fixed curriculum (tasks/curriculum.py) holds out unseen verb/object pairs, which a random-init tiny model
cannot transfer to: it learns a lookup from each instruction to an element id. A family instead draws, from
its instance seed, which items the app holds (their names), their element ids, their order (dates decide the
list order) and which of them the task is about. Two instances share the skill and nothing else, so success on
an unseen instance needs reading the screen: find the row whose text the instruction names and click the id
written next to it (a copy, which a small transformer can learn), not recall.

Every family is "<Kind> “<name>”: <verb> it." on one app: open the named item, press one button on its page,
terminate. The verifier reads app state only (the item's flag after the button); the golden solution is built
from the drawn item id by a separate path and never looks at the verifier.

Splits are seed ranges: training instances use seeds ``0 .. n-1``, held-out instances ``HELDOUT_SEED0 + i``,
so no held-out instance is ever a training instance (tests/unit/test_families.py asserts it on content too).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from maigym_ray.errors import TaskError
from maigym_ray.types import TaskSpec

#: First instance seed of the held-out split; training seeds stay below it.
HELDOUT_SEED0 = 1_000_000
#: The split a family instance gets from its seed.
TRAIN_SPLIT, HELDOUT_SPLIT = "train", "test"

_DATES = [f"2026-11-{d:02d}" for d in range(1, 29)]


@dataclass(frozen=True)
class Family:
    """One task family: an app, a list of named items, one button on an item's page that sets a flag."""

    #: registry name, e.g. "mail-star".
    name: str
    #: the app the family runs on.
    app: str
    #: the app's list of items in its state (``state[app][items]``).
    items: str
    #: element id prefix of an item's row in the list (``<prefix>-<item id>``).
    element: str
    #: item id prefix (``m``, ``c``, ...) before the drawn number.
    id_prefix: str
    #: "<Kind> “{name}”{cite}: <verb> it." with {name} the item's label ({cite}: see ``cite_id``).
    instruction: str
    #: the clicks on the item's page, after opening it.
    clicks: tuple[str, ...]
    #: the item's fields after success (the verifier's match).
    match: dict[str, Any]
    #: the names an instance draws its items from.
    names: tuple[str, ...]
    #: builds one item record from (id, name, date, rng).
    record: Callable[[str, str, str, random.Random], dict[str, Any]]
    #: app state besides the item list.
    extra_state: Callable[[], dict[str, Any]] = dict
    #: items on the screen per instance.
    items_per_instance: int = 4
    #: name the item's id in the instruction too ("Email “X” (m47): star it."): the id still changes every
    #: instance, but the model can copy it from the task instead of finding the row on the screen.
    cite_id: bool = False
    #: "random" (new two-digit ids every instance) or "per_name" (an item's id follows from its name, the
    #: name's place in ``names``: the instance still draws which items, their order, dates and the target, but
    #: the id of a name is learnable as an association).
    ids: str = "random"

    def instance(self, seed: int) -> TaskSpec:
        """The task of instance ``seed`` (deterministic: the same seed gives the same task)."""
        rng = random.Random(f"{self.name}:{seed}")
        names = rng.sample(self.names, self.items_per_instance)
        numbers = rng.sample(range(10, 100), self.items_per_instance)  # two digits: two single tokens
        if self.ids == "per_name":
            numbers = [self.names.index(n) + 1 for n in names]
        dates = rng.sample(_DATES, self.items_per_instance)
        ids = [f"{self.id_prefix}{n}" for n in numbers]
        target = rng.randrange(self.items_per_instance)
        records = [self.record(i, n, d, rng) for i, n, d in zip(ids, names, dates, strict=True)]
        rng.shuffle(records)
        state = {**self.extra_state(), self.items: records}
        check = {
            "op": "exists",
            "app": self.app,
            "path": self.items,
            "match": {"id": ids[target], **self.match},
        }
        golden = (f'click(id="{self.element}-{ids[target]}")', *(f'click(id="{c}")' for c in self.clicks))
        return TaskSpec(
            id=f"fam-{self.name}-{seed}",
            instruction=self.instruction.format(
                name=names[target], cite=f" ({ids[target]})" if self.cite_id else ""
            ),
            apps=(self.app,),
            platforms=("web", "mobile_web"),
            initial_state={self.app: state},
            start_app=self.app,
            verifier={"name": "checks", "params": {"checks": [check]}},
            golden=(*golden, 'terminate(status="success")'),
            max_steps=len(golden) + 3,
            tags=("family", self.name),
            split=HELDOUT_SPLIT if seed >= HELDOUT_SEED0 else TRAIN_SPLIT,
        )


def _mail(mid: str, name: str, day: str, rng: random.Random) -> dict[str, Any]:
    sender = f"{name.split()[0].lower()}@example.com"
    return {
        "id": mid,
        "folder": "inbox",
        "from": sender,
        "to": "alex@example.com",
        "subject": name,
        "body": f"{name}: details inside.",
        "date": day,
        "read": False,
        "starred": False,
    }


def _contact(cid: str, name: str, day: str, rng: random.Random) -> dict[str, Any]:
    return {
        "id": cid,
        "name": name,
        "phone": f"+49 151 {rng.randrange(1000000, 9999999)}",
        "email": name.split()[0].lower() + "@example.com",
        "company": f"{name.split()[-1]} GmbH",
        "favorite": False,
    }


def _note(nid: str, name: str, day: str, rng: random.Random) -> dict[str, Any]:
    return {"id": nid, "title": name, "body": f"{name}: notes.", "pinned": False, "updated": day}


def _plant(pid: str, name: str, day: str, rng: random.Random) -> dict[str, Any]:
    return {
        "id": pid,
        "name": name,
        "species": name,
        "room": rng.choice(["Kitchen", "Bedroom", "Office", "Balcony"]),
        "every_days": rng.randrange(3, 15),
        "last_watered": day,
    }


_SUBJECTS = (
    "Invoice November",
    "Project kickoff",
    "Weekly deals newsletter",
    "Planning meeting",
    "Flight confirmation",
    "Dinner on Friday",
    "Quarterly report draft",
    "Gym membership renewal",
    "Budget review",
    "Team lunch",
    "Password reset",
    "Order shipped",
    "Holiday plans",
    "Contract renewal",
    "Book club",
    "Train tickets",
)
_PEOPLE = (
    "Tom Becker",
    "Sara Kim",
    "Omar Haddad",
    "Carol Diaz",
    "Nina Patel",
    "Lena Vogel",
    "Paul Weber",
    "Erin Walsh",
    "Dave Brown",
    "Priya Shah",
    "Jonas Berg",
    "Anna Lopez",
    "Ben Meyer",
    "Mia Rossi",
    "Leo Park",
    "Zoe Martin",
)
_NOTES = (
    "Shopping list",
    "Gift ideas",
    "Meeting notes",
    "Wi-Fi password",
    "Travel checklist",
    "Recipe ideas",
    "Book list",
    "Garden plan",
    "Movie list",
    "Packing list",
    "Workout plan",
    "Party plan",
    "Budget notes",
    "Phone numbers",
    "Car service",
    "Song ideas",
)
_PLANTS = (
    "Monstera",
    "Fiddle-leaf fig",
    "Snake plant",
    "Basil",
    "Thai basil",
    "Peace lily",
    "Aloe vera",
    "Cactus",
    "Orchid",
    "Fern",
    "Mint",
    "Rosemary",
    "Ivy",
    "Bamboo",
    "Rubber plant",
    "Jade plant",
)

#: Every family, by name (a registry: a new family is one entry).
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "mail-star",
            "mail",
            "messages",
            "msg",
            "m",
            "Email “{name}”{cite}: star it.",
            ("star",),
            {"starred": True},
            _SUBJECTS,
            _mail,
            lambda: {"me": "alex@example.com"},
        ),
        Family(
            "mail-open",
            "mail",
            "messages",
            "msg",
            "m",
            "Email “{name}”{cite}: open it.",
            (),
            {"read": True},
            _SUBJECTS,
            _mail,
            lambda: {"me": "alex@example.com"},
        ),
        Family(
            "contacts-favorite",
            "contacts",
            "contacts",
            "contact",
            "c",
            "Contact “{name}”{cite}: favourite it.",
            ("favorite",),
            {"favorite": True},
            _PEOPLE,
            _contact,
        ),
        Family(
            "notes-pin",
            "notes",
            "notes",
            "note",
            "n",
            "Note “{name}”{cite}: pin it.",
            ("pin",),
            {"pinned": True},
            _NOTES,
            _note,
        ),
        # plants is one of the novel apps (apps/registry.py NOVEL_APPS): the verifier-only RL experiment.
        Family(
            "plants-water",
            "plants",
            "plants",
            "plant",
            "p",
            "Plant “{name}”{cite}: water it.",
            ("water",),
            {"last_watered": "2026-12-01"},
            _PLANTS,
            _plant,
            lambda: {"log": []},
        ),
    )
}

#: The pool spec prefix: ``families:mail-star,contacts-favorite`` (runtime/pools.py).
FAMILIES_PREFIX = "families:"


def family_names(spec: str) -> list[str]:
    """The family names of ``spec`` ("a,b" or "all"); an unknown name raises TaskError listing the valid ones."""
    names = list(FAMILIES) if spec == "all" else [n for n in spec.split(",") if n]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names:
        raise TaskError(f"unknown task families {unknown or spec!r}; valid: {', '.join(FAMILIES)}")
    return names


def train_seeds(n: int) -> range:
    """The instance seeds of the training split."""
    return range(n)


def heldout_seeds(n: int) -> range:
    """The instance seeds of the held-out split (disjoint from every :func:`train_seeds`)."""
    return range(HELDOUT_SEED0, HELDOUT_SEED0 + n)


def family_tasks(
    names: Iterable[str],
    n_train: int,
    n_heldout: int,
    *,
    train_split: str = TRAIN_SPLIT,
    cite_ids: bool = False,
    ids: str = "random",
) -> list[TaskSpec]:
    """``n_train`` training and ``n_heldout`` held-out instances of each family, families interleaved (so a
    ``tasks.limit`` keeps every family). ``train_split`` relabels the training instances (e.g. "rl" for the
    novel-apps experiment, where they are trained on by RL only)."""
    if ids not in ("random", "per_name"):
        raise TaskError(f"family ids {ids!r}: choose random or per_name")
    fams = [replace(FAMILIES[n], cite_id=cite_ids, ids=ids) for n in names]
    out = []
    for seeds in (train_seeds(n_train), heldout_seeds(n_heldout)):
        for s in seeds:
            for f in fams:
                t = f.instance(s)
                out.append(t if t.split == HELDOUT_SPLIT else _relabel(t, train_split))
    return out


def _relabel(t: TaskSpec, split: str) -> TaskSpec:
    return t if t.split == split else replace(t, split=split)
