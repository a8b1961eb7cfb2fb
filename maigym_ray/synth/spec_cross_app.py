"""Cross-app tasks derived from two app specs: the evidence is in one app, the change in another.

"Look up the category of the lot "Dune" in BidBay; in Phonebook, edit the contact "Ann Lee": set Notes to it."
The agent must open app A, read a fact off a record's screen, switch to app B (``open_app``) and write that fact
into a text field of one of B's forms: an update of a record, a booking made from a record, or a new record.
Evidence spans two apps: the task cannot be done from either alone.

The halves are written apart, as for :mod:`maigym_ray.synth.spec_answer`: the verifier expects B's record to
hold the value *A's state* gives (numbers as a substring, since a screen shows money as "€320"); the golden reads
the value off A's *rendered screen* and types what it read.

Pairs of apps, facts and targets are taken in a seeded shuffle, so the set is deterministic in ``rng_seed``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from maigym_ray.errors import TaskError
from maigym_ray.synth.screens import Screens
from maigym_ray.synth.spec_answer import expected, field_label, read_field
from maigym_ray.synth.spec_tasks import Deriver, check, met

#: Source field types whose value can be typed into another app's text field.
_SOURCE = ("string", "enum", "date", "int", "money", "ref")


def _facts(d: Deriver) -> list[tuple[str, dict[str, Any], str, list[str]]]:
    """(entity, record, field, opening steps) of every fact app ``d`` shows that could be copied elsewhere."""
    out = []
    for en, ent in d.ents.items():
        for rec in d.state[en]:
            opening = d.opening(en, rec)
            if opening is None:
                continue
            for fn, f in ent["fields"].items():
                if fn == ent["title_field"] or f["type"] not in _SOURCE or d.subject(en, rec, (fn,)) is None:
                    continue
                if expected(d, en, fn, rec) is not None:
                    out.append((en, rec, fn, opening))
    return out


def _targets(d: Deriver) -> list[tuple[dict[str, Any], dict[str, Any] | None, str, list[str]]]:
    """(action, record or None for a ``create``, string/text field of its form, opening steps) in app ``d``:
    an update of the record, a booking made from it, or a new record from the navigation bar."""
    out: list[tuple[dict[str, Any], dict[str, Any] | None, str, list[str]]] = []
    for a in d.spec["actions"]:
        if a["kind"] not in ("update", "book", "create"):
            continue
        fen = a["creates"] if a["kind"] == "book" else a["entity"]
        fields = [fn for fn in a.get("fields", []) if d.ents[fen]["fields"][fn]["type"] in ("string", "text")]
        if a["kind"] == "create":
            out += [(a, None, fn, []) for fn in fields]
            continue
        for rec in d.eligible(a):
            opening = d.opening(a["entity"], rec)
            if opening is None:
                continue
            avoid = (lambda fn: (fn,)) if a["kind"] == "update" else (lambda fn: ())
            out += [
                (a, rec, fn, opening) for fn in fields if d.subject(a["entity"], rec, avoid(fn)) is not None
            ]
    return out


def cross_app_tasks(
    specs: Sequence[dict[str, Any]], states: dict[str, dict[str, Any]], limit: int, rng_seed: int = 0
) -> list[dict[str, Any]]:
    """Up to ``limit`` tasks over ordered pairs of the given spec apps (``states``: each app's default state),
    spread round-robin over the pairs so that every pair gets tasks before any gets many."""
    rng = random.Random(f"cross-{rng_seed}")
    ders = {s["name"]: Deriver(s, states[s["name"]]) for s in specs}
    facts = {n: _facts(d) for n, d in ders.items()}
    targets = {n: _targets(d) for n, d in ders.items()}
    pairs = [(a, b) for a in ders for b in ders if a != b and facts[a] and targets[b]]
    rng.shuffle(pairs)
    screens = {n: Screens({}, [n]) for n in ders}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rnd in range(limit):
        grew = False
        for src, dst in pairs:
            if len(out) >= limit:
                return out
            fs, ts = facts[src], targets[dst]
            # the rnd-th combination of this pair, spread over facts and targets
            i = rng.randrange(len(fs) * len(ts))
            (en, rec, fn, open_a), (a, trec, tfn, open_b) = fs[i % len(fs)], ts[i // len(fs)]
            tid = f"spec-x-{src}-{en}.{rec['id']}.{fn}-{dst}-{a['id']}.{trec['id'] if trec else 'new'}.{tfn}"
            if tid in seen:
                continue
            seen.add(tid)
            task = _task(
                ders[src], ders[dst], screens[src], (en, rec, fn, open_a), (a, trec, tfn, open_b), tid
            )
            if task is not None:
                out.append(task)
                grew = True
        if not grew and rnd > 0:
            break
    return out


def _task(
    ds: Deriver,
    dt: Deriver,
    screens: Screens,
    fact: tuple[str, dict[str, Any], str, list[str]],
    target: tuple[dict[str, Any], dict[str, Any] | None, str, list[str]],
    tid: str,
) -> dict[str, Any] | None:
    en, rec, fn, open_a = fact
    a, trec, tfn, open_b = target
    f = ds.ents[en]["fields"][fn]
    want = expected(ds, en, fn, rec)
    if want is None:
        return None
    value = want[0][0]
    if trec is not None and a["kind"] == "update" and str(trec.get(tfn, "")) == value:
        return None  # already holds it: the initial state would pass
    try:
        shown = read_field(screens, ds.app, open_a, field_label(f, fn))
    except TaskError:
        return None
    match = {"$contains": value} if want[1] else value
    fen = a["creates"] if a["kind"] == "book" else a["entity"]
    tlabel = field_label(dt.ents[fen]["fields"][tfn], tfn)
    typed = f"type(id={json.dumps(tfn)}, text={json.dumps(shown, ensure_ascii=False)})"
    golden = [*open_a, f"open_app(name={json.dumps(dt.app)})", *open_b, f'click(id="{a["id"]}")']
    if a["kind"] == "update":
        golden += [typed, 'click(id="save")']
        checks = [check(dt.app, fen, {"id": trec["id"], tfn: match, **a.get("set", {})})]
        doing = f"{a['label']} {dt.subject(fen, trec, (tfn,))}: set {tlabel} to that value"
    else:
        # the form's other fields get the values a single-action task would give; the instruction says them
        fill, values = dt.fill(fen, [x for x in a.get("fields", []) if x != tfn], None)
        golden += [*fill, typed, 'click(id="save")']
        others = "".join(f", {k.replace('_', ' ')} {v}" for k, v in values.items())
        if a["kind"] == "book":
            copied = {dst: trec[src] for dst, src in a.get("copy", {}).items()}
            link = {a["link_field"]: trec["id"], **copied}
            checks = [check(dt.app, fen, {**link, **values, tfn: match})]
            if a.get("set"):
                checks.append(check(dt.app, a["entity"], {"id": trec["id"], **a["set"]}))
            doing = (
                f"{a['label']} for {dt.subject(a['entity'], trec)}, with {tlabel} set to that value{others}"
            )
        else:
            checks = [check(dt.app, fen, {**values, tfn: match})]
            doing = f"{a['label']}, with {tlabel} set to that value{others}"
    instruction = (
        f"Look up the {field_label(f, fn).lower()} of {ds.subject(en, rec, (fn,))} in {ds.spec['title']}. "
        f"Then in {dt.spec['title']}: {doing}."
    )
    if all(met(dt.state, c) for c in checks):
        return None  # a record of the default state already matches: the initial state would pass
    return dt.record(
        tid,
        instruction,
        golden,
        checks,
        ["template:spec_cross_app", "cross_app", f"field:{f['type']}", f"action:{a['kind']}"],
        apps=[ds.app, dt.app],
    )
