"""Find-and-answer tasks derived from an app spec: a question about seeded data, answered off a screen.

Two kinds:

- ``spec_answer``: "What is the current bid of the lot "Dune"?" for a field of a record its detail screen shows;
- ``spec_count``: "How many lots does the Watchlist show?" for a list screen (with its filter).

As everywhere in synthesis, the two halves are written apart: the verifier's expected answer comes from the
app's *state* (the record's value, the records that meet the screen's filter), the golden solution from the
*rendered screens* (:class:`~maigym_ray.synth.screens.Screens`): it opens the record and reads the value off
the page by its label, or counts the rows the list shows, then answers. A screen that does not show what the
question asks drops the question here, and a reading that disagrees with the state fails live validation.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from maigym_ray.apps.spec.app import holds
from maigym_ray.errors import TaskError
from maigym_ray.synth.screens import Screens
from maigym_ray.synth.spec_tasks import Deriver

#: Field types a question may ask about (a free-text body is not a short answer).
_ASKABLE = ("string", "enum", "date", "int", "money", "bool", "ref")


def field_label(f: dict[str, Any], fn: str) -> str:
    """A field's label, as screens show it."""
    return f.get("label") or fn.replace("_", " ").capitalize()


def expected(d: Deriver, en: str, fn: str, rec: dict[str, Any]) -> tuple[list[str], bool] | None:
    """The answers a verifier accepts for field ``fn`` of ``rec`` (from the state), and whether numerically;
    None for a value there is nothing to ask about (empty, or an id of another app's record)."""
    f = d.ents[en]["fields"][fn]
    v = rec.get(fn)
    if f["type"] == "bool":
        return (["yes", "true"] if v else ["no", "false"]), False
    if v in (None, ""):
        return None
    if f["type"] in ("int", "money"):
        return [str(v)], True
    if f["type"] == "ref":
        if f["ref"] not in d.state:
            return None
        target = next((r for r in d.state[f["ref"]] if r["id"] == v), None)
        return None if target is None else ([d.title(f["ref"], target)], False)
    return [str(v)], False


def read_field(screens: Screens, app: str, opening: list[str], label: str) -> str:
    """Opens a record as the golden does and reads the value shown after ``<label>:`` (a TaskError if absent)."""
    screens.open_app(app)
    for act in opening:
        screens.click(re.fullmatch(r'click\(id="([^"]+)"\)', act).group(1))  # type: ignore[union-attr]
    m = re.search(rf"(?m)^{re.escape(label)}: (.+)$", screens.page.text)
    if m is None:
        raise TaskError(f"{label!r} is not shown on {screens.page.path}")
    return m.group(1).strip()


def perturbed(d: Deriver, en: str, fn: str, rec: dict[str, Any], k: int) -> Any:
    """The ``k``-th other value of field ``fn`` of ``rec`` for a seed variant (None: no variant of this type)."""
    f = d.ents[en]["fields"][fn]
    v = rec.get(fn)
    if f["type"] in ("int", "money") and isinstance(v, int):
        return v + 3 * k + 1
    if f["type"] == "bool" and k == 1:
        return not v
    if f["type"] == "enum" and v in f["values"] and len(f["values"]) > k:
        return f["values"][(f["values"].index(v) + k) % len(f["values"])]
    if f["type"] == "date" and isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\d", v):
        return (datetime.date.fromisoformat(v) + datetime.timedelta(days=k)).isoformat()
    if f["type"] == "ref" and f["ref"] in d.state and len(d.state[f["ref"]]) > k:
        ids = [r["id"] for r in d.state[f["ref"]]]
        return ids[(ids.index(v) + k) % len(ids)] if v in ids else None
    return None


def _question(
    spec: dict[str, Any],
    d: Deriver,
    en: str,
    rec: dict[str, Any],
    fn: str,
    tid: str,
    seed: dict[str, Any] | None,
) -> dict[str, Any] | None:
    ent = d.ents[en]
    f = ent["fields"][fn]
    opening = d.opening(en, rec)
    want = expected(d, en, fn, rec)
    subject = d.subject(en, rec, (fn,))
    if opening is None or want is None or subject is None:
        return None
    label = field_label(f, fn)
    try:
        shown = read_field(Screens({d.app: seed} if seed else {}, [d.app]), d.app, opening, label)
    except TaskError:
        return None  # the detail screen does not show this field: nothing to read it off
    any_of, numeric = want
    question = (
        f"Is {label.lower()} set for {subject}? Answer yes or no"
        if f["type"] == "bool"
        else f"What is the {label.lower()} of {subject}"
    )
    task = d.record(
        tid,
        f"In {spec['title']}: {question}?",
        [*opening, f"answer(text={json.dumps(shown, ensure_ascii=False)})"],
        [{"op": "answer", "any_of": any_of, "numeric": numeric}],
        ["template:spec_answer", f"field:{f['type']}", *(["seed_variant"] if seed else [])],
    )
    if seed:
        task["initial_state"] = {d.app: seed}
    return task


def answer_tasks(
    spec: dict[str, Any], state: dict[str, Any], limit: int, variants: int = 0
) -> list[dict[str, Any]]:
    """Up to ``limit`` questions about records' fields, one per (record, field) a detail screen shows, each
    followed by up to ``variants`` seed variants: the same question on an initial state where that field holds
    another value, so its answer differs (no answer can be learnt by heart). Variants count towards ``limit``."""
    d = Deriver(spec, state)
    out: list[dict[str, Any]] = []
    for en, ent in d.ents.items():
        for rec in state[en]:
            for fn, f in ent["fields"].items():
                if fn == ent["title_field"] or f["type"] not in _ASKABLE:
                    continue
                base = f"spec-{d.app}-answer-{en}-{rec['id']}-{fn}"
                t = _question(spec, d, en, rec, fn, base, None)
                if t is None:
                    continue
                out.append(t)
                for k in range(1, variants + 1):
                    v = perturbed(d, en, fn, rec, k)
                    if v is None:
                        break
                    recs = [{**r, fn: v} if r["id"] == rec["id"] else r for r in state[en]]
                    vd = Deriver(spec, {**state, en: recs})
                    vt = _question(spec, vd, en, {**rec, fn: v}, fn, f"{base}-v{k}", {en: recs})
                    if vt is not None:
                        out.append(vt)
                if len(out) >= limit:
                    return out[:limit]
    return out


def count_tasks(spec: dict[str, Any], state: dict[str, Any]) -> list[dict[str, Any]]:
    """One "how many" question per list screen: the verifier counts the state's records that meet the screen's
    filter, the golden counts the rows the screen shows."""
    d = Deriver(spec, state)
    screens = Screens({}, [d.app])
    out = []
    for s in spec["screens"]:
        if s["kind"] != "list":
            continue
        en = s["entity"]
        n = sum(1 for r in state[en] if "filter" not in s or holds(s["filter"], r))
        screens.open_app(d.app)
        screens.click(f"nav-{s['id']}")
        shown = len(screens.rows(f"{en}-"))
        where = s.get("title") or d.ents[en]["label"] + "s"
        out.append(
            d.record(
                f"spec-{d.app}-count-{s['id']}",
                f"In {spec['title']}: how many {d.ents[en]['label'].lower()} entries does the "
                f'"{where}" screen list? Answer with a number.',
                [f'click(id="nav-{s["id"]}")', f'answer(text="{shown}")'],
                [{"op": "answer", "any_of": [str(n)], "numeric": True}],
                ["template:spec_count"],
            )
        )
    return out
