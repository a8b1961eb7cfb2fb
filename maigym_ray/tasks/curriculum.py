"""The debug curriculum: short, composable tasks that a tiny model can learn on a CPU in minutes.

The main job (``cli.train experiment=debug``) has to show real learning on a 2-core machine, so it needs tasks
whose skills transfer from the training split to held-out tasks. Every task here is "verb an object":
open one item in the Post (mail) or People (contacts) app, press one action on its page (none for "open"),
confirm when the app asks, then terminate. Each held-out task pairs an object and a verb that both occur in
training tasks, but never together: held-out success needs the two skills composed, not a memorised episode.

The held-out pairs are a Latin square over the mail app: one verb held out per email, each of the four verbs
held out for two emails. So every held-out email still occurs with three verbs in training and every verb
with six emails, and neither the object nor the verb predicts the other. The contacts app has only two verbs;
holding one out would leave that contact with a single training verb, a pairing a small model memorises (the
first version held out four contact pairs, and the model applied the one verb it had seen with each contact),
so contacts are training-only.

Every task of an app starts from the same seed (``initial_state``), with eight items per app.
The verifier reads app state only; the golden solution is written from the (object, verb) pair by a separate
path and never looks at the verifier.
"""

from __future__ import annotations

from dataclasses import dataclass

from maigym_ray.types import TaskSpec


@dataclass(frozen=True)
class Verb:
    """One skill of the curriculum: the clicks that apply it to an opened item, and what it changes."""

    app: str
    name: str
    instruction: str  # format string with {obj}
    clicks: tuple[str, ...]  # after opening the item
    match: dict[str, object]  # the item's fields after success


MAIL = {
    "m1": ("Invoice November", "carol@example.com"),
    "m2": ("Project kickoff", "dave@example.com"),
    "m3": ("Weekly deals newsletter", "news@shop.example"),
    "m4": ("Planning meeting", "erin@example.com"),
    "m5": ("Flight confirmation", "travel@air.example"),
    "m6": ("Dinner on Friday", "sara@example.com"),
    "m7": ("Quarterly report draft", "omar@example.com"),
    "m8": ("Gym membership renewal", "club@fit.example"),
}
PEOPLE = {
    "c1": ("Tom Becker", "Becker Bau"),
    "c2": ("Sara Kim", "Kim Design"),
    "c3": ("Omar Haddad", "Northwind Logistics"),
    "c4": ("Old Plumber", "Pipes & Co"),
    "c5": ("Carol Diaz", "Diaz Accounting"),
    "c6": ("Nina Patel", "Patel Studio"),
    "c7": ("Lena Vogel", "Vogel Media"),
    "c8": ("Paul Weber", "Weber Garden"),
}
# One template shape for every verb ("<Kind> <object>: <verb> it."): the object sits at the same place
# whatever the verb, and the verb comes last, right before the model's turn (the prompt restates the task at
# the end of each observation). With the verb first ("Star the email X.") the tiny model tied each email to
# the verbs it was trained with: after SFT, the teacher-forced verb step of the held-out pairs was 0.24 and
# held-out success 0.14-0.21. With the verb last, 119 of 128 held-out episodes took the task's verb as their
# second action (on whichever email was open) and success was 0.30 (README, "held-out success").
VERBS = (
    Verb("mail", "open", "Email “{obj}”: open it.", (), {"read": True}),
    Verb("mail", "star", "Email “{obj}”: star it.", ("star",), {"starred": True}),
    Verb("mail", "archive", "Email “{obj}”: archive it.", ("archive",), {"folder": "archive"}),
    Verb("mail", "trash", "Email “{obj}”: trash it.", ("delete", "delete-yes"), {"folder": "trash"}),
    Verb("contacts", "favorite", "Contact {obj}: favourite it.", ("favorite",), {"favorite": True}),
    Verb("contacts", "delete", "Contact {obj}: delete it.", ("delete", "delete-yes"), {}),
)
#: (verb, object id) pairs held out of training: a Latin square over the mail app (see the module docstring).
HELDOUT = frozenset(
    {
        ("open", "m1"),
        ("star", "m2"),
        ("archive", "m3"),
        ("trash", "m4"),
        ("open", "m5"),
        ("star", "m6"),
        ("archive", "m7"),
        ("trash", "m8"),
    }
)


def curriculum_seeds() -> dict[str, dict[str, object]]:
    """The two apps' states every curriculum task starts from (more items than the default seeds, so that
    which item to open can only come from reading the instruction)."""
    messages = [
        {
            "id": mid,
            "folder": "inbox",
            "from": sender,
            "to": "alex@example.com",
            "subject": subject,
            "body": f"{subject}: details inside.",
            "date": f"2026-11-{20 + int(mid[1:]):02d}",
            "read": False,
            "starred": False,
        }
        for mid, (subject, sender) in MAIL.items()
    ]
    contacts = [
        {
            "id": cid,
            "name": name,
            "phone": f"+49 151 55500{int(cid[1:]):02d}",
            "email": name.split()[0].lower() + "@example.com",
            "company": company,
            "favorite": False,
        }
        for cid, (name, company) in PEOPLE.items()
    ]
    return {"mail": {"me": "alex@example.com", "messages": messages}, "contacts": {"contacts": contacts}}


def _task(verb: Verb, oid: str, label: str, seed: dict[str, object]) -> TaskSpec:
    items, prefix = ("messages", "msg") if verb.app == "mail" else ("contacts", "contact")
    if verb.match:
        check = {"op": "exists", "app": verb.app, "path": items, "match": {"id": oid, **verb.match}}
    else:
        check = {"op": "absent", "app": verb.app, "path": items, "match": {"id": oid}}
    golden = (f'click(id="{prefix}-{oid}")', *(f'click(id="{c}")' for c in verb.clicks))
    return TaskSpec(
        id=f"cur-{verb.name}-{oid}",
        instruction=verb.instruction.format(obj=label),
        apps=(verb.app,),
        platforms=("web", "mobile_web"),
        initial_state={verb.app: seed},
        start_app=verb.app,
        verifier={"name": "checks", "params": {"checks": [check]}},
        golden=(*golden, 'terminate(status="success")'),
        max_steps=len(golden) + 3,
        tags=("curriculum", verb.name),
        split="test" if (verb.name, oid) in HELDOUT else "train",
    )


def curriculum_tasks() -> list[TaskSpec]:
    """Every curriculum task (train and test splits), in a fixed order."""
    seeds = curriculum_seeds()
    out = []
    for verb in VERBS:
        objects = MAIL if verb.app == "mail" else PEOPLE
        for oid, (label, _) in objects.items():
            out.append(_task(verb, oid, label, seeds[verb.app]))
    return out
