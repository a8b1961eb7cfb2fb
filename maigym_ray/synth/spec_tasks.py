"""Single-action tasks derived from an app spec, and the per-action effects the other spec task kinds chain.

The golden solution and the verifier come from different parts of the spec, so one cannot simply echo the other:
the golden is built from the *screens* (which list shows the record, the element-id conventions of
:mod:`maigym_ray.apps.spec.app`), the verifier from the *action's declared effect* (the field it toggles, the
record it creates, the balance it debits). A task whose golden does not reach its goal is caught by live
validation (``synth/validation.py``), not trusted.

:class:`Deriver` gives one :class:`Effect` per (action, record): the golden steps from the record's detail
screen on, the checks, the words for the instruction and the records it touches. Single-action tasks put one
effect behind the navigation to its record; :mod:`maigym_ray.synth.spec_multi` chains several.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from maigym_ray.apps.registry import NOVEL_APPS
from maigym_ray.apps.spec.app import holds
from maigym_ray.apps.spec.loader import default_value

#: An element id the action grammar accepts.
_ID = re.compile(r"[A-Za-z0-9_.:-]+")
#: What a golden solution types into a field of each type (values no seed uses, so the initial state fails).
_TYPED = {"string": "Alex Doe", "text": "Booked by the agent", "int": "2", "money": "2", "date": "2026-12-24"}
#: what a field is typed to when it already holds its :data:`_TYPED` value (an edit right after a create): a value
#: of the same type, so a date field gets a date.
_TYPED_AGAIN = {
    "string": "Sam Lee",
    "text": "Changed by the agent",
    "int": "3",
    "money": "3",
    "date": "2026-12-31",
}


def check(app: str, path: str, match: dict[str, Any], op: str = "exists") -> dict[str, Any]:
    """One ``checks``-verifier check on ``app``'s state."""
    return {"op": op, "app": app, "path": path, "match": match}


def met(state: dict[str, Any], c: dict[str, Any]) -> bool:
    """Whether an ``exists`` check of a derived task already holds on its app's default state (records by
    entity): a task whose every check does would score 1 before its first step."""

    def same(have: Any, want: Any) -> bool:
        if isinstance(want, dict) and "$contains" in want:
            return str(want["$contains"]) in str(have if have is not None else "")
        return have == want

    records = state.get(c["path"], [])
    return c["op"] == "exists" and any(all(same(r.get(k), v) for k, v in c["match"].items()) for r in records)


def _coerced(f: dict[str, Any], raw: str) -> Any:
    return int(raw) if f["type"] in ("int", "money") else raw


def split_for(apps: list[str]) -> str:
    """``ood_app`` when a task touches a novel app (never trained on), else ``train``."""
    return "ood_app" if set(apps) & set(NOVEL_APPS) else "train"


@dataclass(frozen=True)
class Effect:
    """One action on one record: golden steps from the record's detail screen on, and what they must achieve."""

    steps: tuple[str, ...]
    checks: tuple[dict[str, Any], ...]
    #: the instruction's words for it ("Watch for the lot "Dune"")
    what: str
    #: (entity, id) of every record it changes or reads; chained effects must not share one
    touched: frozenset[tuple[str, str]]
    kind: str


class Deriver:
    """Derives effects and tasks from one spec and the app's default state."""

    def __init__(self, spec: dict[str, Any], state: dict[str, Any]) -> None:
        self.spec, self.state, self.app = spec, state, spec["name"]
        self.ents = spec["entities"]

    def screen_for(self, en: str, rec: dict[str, Any]) -> str | None:
        """A list screen (in the nav bar) that shows ``rec`` without a query."""
        for s in self.spec["screens"]:
            if s["kind"] == "list" and s["entity"] == en and ("filter" not in s or holds(s["filter"], rec)):
                return s["id"]
        return None

    def title(self, en: str, rec: dict[str, Any]) -> str:
        return str(rec[self.ents[en]["title_field"]])

    def shown(self, en: str, fn: str, rec: dict[str, Any]) -> str:
        """A field's value as the screens show it (money as "€12", yes/no, a referenced record's title)."""
        f, v = self.ents[en]["fields"][fn], rec.get(fn)
        if f["type"] == "money":
            return f"€{v}"
        if f["type"] == "bool":
            return "yes" if v else "no"
        if f["type"] == "ref" and f["ref"] in self.state:
            hit = next((r for r in self.state[f["ref"]] if r["id"] == v), None)
            return self.title(f["ref"], hit) if hit else str(v)
        return str(v)

    def subject(self, en: str, rec: dict[str, Any], avoid: tuple[str, ...] = ()) -> str | None:
        """How an instruction names ``rec`` unambiguously: 'the car "BMW i3"', and when several records share
        that title, the values that tell it apart ('the car "BMW i3" (zone Mitte)'), the list's columns first;
        None when nothing does. Fields in ``avoid`` are never used (a question must not name its answer)."""
        ent = self.ents[en]
        label, t = ent["label"].lower(), self.title(en, rec)
        same = [r for r in self.state[en] if r["id"] != rec["id"] and self.title(en, r) == t]
        if not same:
            return f'the {label} "{t}"'
        screen = next((s for s in self.spec["screens"] if s["id"] == self.screen_for(en, rec)), {})
        order = [*screen.get("columns", []), *ent["fields"]]
        parts: list[str] = []
        for fn in dict.fromkeys(order):
            if (
                fn in avoid
                or fn == ent["title_field"]
                or fn not in ent["fields"]
                or ent["fields"][fn]["type"] == "text"
            ):
                continue
            v = self.shown(en, fn, rec)
            left = [r for r in same if self.shown(en, fn, r) == v]
            if len(left) < len(same):
                parts.append(f"{fn.replace('_', ' ')} {v}")
                same = left
            if not same:
                return f'the {label} "{t}" (' + ", ".join(parts) + ")"
        return None

    def eligible(self, a: dict[str, Any]) -> list[dict[str, Any]]:
        """The records of the default state that ``a``'s preconditions allow."""
        return [r for r in self.state[a["entity"]] if all(holds(c, r) for c in a.get("preconditions", []))]

    def fill(
        self, en: str, fields: list[str], rec: dict[str, Any] | None
    ) -> tuple[list[str], dict[str, Any]]:
        """Golden steps that fill a form, and the values they give each field."""
        steps: list[str] = []
        values: dict[str, Any] = {}
        for fn in fields:
            f = self.ents[en]["fields"][fn]
            now = rec.get(fn) if rec is not None else None
            if f["type"] == "ref" and f["ref"] in self.state:
                pick = self.state[f["ref"]][0]["id"]
                steps.append(f'click(id="{fn}-{pick}")')
                values[fn] = pick
            elif f["type"] == "enum":
                ok = [v for v in f["values"] if _ID.fullmatch(f"{fn}-{v}")]  # clickable: a valid element id
                pick = next((v for v in reversed(ok) if v != now), now if now in ok else None)
                if pick is None:
                    continue  # no choice an action can name: the form keeps what it shows
                steps.append(f'click(id="{fn}-{pick}")')
                values[fn] = pick
            elif f["type"] == "bool":
                if not now:
                    steps.append(f'click(id="{fn}")')
                values[fn] = True
            elif f["type"] == "ref":
                continue  # another app's id: not typed by a derived task
            else:
                raw = _TYPED[f["type"]] if str(now) != _TYPED[f["type"]] else _TYPED_AGAIN[f["type"]]
                steps.append(f"type(id={json.dumps(fn)}, text={json.dumps(raw)})")
                values[fn] = _coerced(f, raw)
        return steps, values

    def effect(self, a: dict[str, Any], rec: dict[str, Any]) -> Effect | None:
        """``a`` on ``rec``, from its detail screen; None when the default state gives it nothing to do."""
        en, kind, app = a["entity"], a["kind"], self.app
        subject = self.subject(en, rec)
        if subject is None:
            return None
        steps = [f'click(id="{a["id"]}")']
        checks: list[dict[str, Any]] = []
        touched = {(en, rec["id"])}
        what = f"{a['label']} for {subject}"
        if kind == "toggle":
            if a.get("confirm"):
                steps.append(f'click(id="{a["id"]}-yes")')
            checks.append(
                check(app, en, {"id": rec["id"], a["field"]: not rec[a["field"]], **a.get("set", {})})
            )
            state = "off" if rec[a["field"]] else "on"
            what = f"{a['label']} ({a['field'].replace('_', ' ')}: {state}) for {subject}"
        elif kind == "delete":
            steps.append(f'click(id="{a["id"]}-yes")')
            checks.append(check(app, en, {"id": rec["id"]}, "absent"))
        elif kind == "update":
            fill, values = self.fill(en, a["fields"], rec)
            steps += [*fill, 'click(id="save")']
            checks.append(check(app, en, {"id": rec["id"], **values, **a.get("set", {})}))
            if values:
                what += ": " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items())
        elif kind == "book":
            fill, values = self.fill(a["creates"], a.get("fields", []), None)
            steps += [*fill, 'click(id="save")'] if a.get("fields") else []
            copied = {dst: rec[src] for dst, src in a.get("copy", {}).items()}
            checks.append(check(app, a["creates"], {a["link_field"]: rec["id"], **values, **copied}))
            if a.get("set"):
                checks.append(check(app, en, {"id": rec["id"], **a["set"]}))
            if values:
                what += " (" + ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in values.items()) + ")"
        elif kind == "pay":
            tent, _, tfield = a["target"].partition(".")
            acct = next((r for r in self.state[tent] if r[tfield] >= rec[a["field"]]), None)
            if acct is None:
                return None
            steps += [f'click(id="account-{acct["id"]}")', 'click(id="save")']
            checks.append(check(app, en, {"id": rec["id"], **a["set"]}))
            checks.append(check(app, tent, {"id": acct["id"], tfield: acct[tfield] - rec[a["field"]]}))
            touched.add((tent, acct["id"]))
            what += f' with "{acct[self.ents[tent]["title_field"]]}"'
        elif kind == "transfer":
            tgt = a.get("target", en)
            other = next((r for r in self.state[tgt] if r["id"] != rec["id"]), None)
            if other is None or rec[a["field"]] < 1:
                return None
            steps += [f'click(id="to-{other["id"]}")', 'type(id="amount", text="1")', 'click(id="save")']
            checks.append(check(app, en, {"id": rec["id"], a["field"]: rec[a["field"]] - 1}))
            checks.append(check(app, tgt, {"id": other["id"], a["field"]: other[a["field"]] + 1}))
            touched.add((tgt, other["id"]))
            what += f': move 1 to "{other[self.ents[tgt]["title_field"]]}"'
        else:
            return None
        if all(met(self.state, c) for c in checks):
            return None  # the default state already meets the goal: the verifier would pass before any step
        return Effect(tuple(steps), tuple(checks), what, frozenset(touched), kind)

    def create(self, a: dict[str, Any]) -> tuple[Effect, dict[str, Any]] | None:
        """A ``create`` action from the navigation bar, and the record it makes (with the id the app gives it:
        the prefix plus one more than the largest number in use)."""
        en = a["entity"]
        fill, values = self.fill(en, a["fields"], None)
        if not values:
            return None
        prefix = self.ents[en]["id_prefix"]
        nums = [int(r["id"][len(prefix) :]) for r in self.state[en] if r["id"][len(prefix) :].isdigit()]
        rec = {
            "id": f"{prefix}{max([*nums, 0]) + 1}",
            **{fn: default_value(f) for fn, f in self.ents[en]["fields"].items()},
            **values,
        }
        shown = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items() if k in rec)
        eff = Effect(
            (f'click(id="{a["id"]}")', *fill, 'click(id="save")'),
            (check(self.app, en, values),),
            f"{a['label']} ({shown})",
            frozenset({(en, rec["id"])}),
            "create",
        )
        return eff, rec

    def opening(self, en: str, rec: dict[str, Any]) -> list[str] | None:
        """Golden steps that open ``rec``'s detail screen from anywhere in the app (its list in the nav bar)."""
        screen = self.screen_for(en, rec)
        return None if screen is None else [f'click(id="nav-{screen}")', f'click(id="{en}-{rec["id"]}")']

    def record(
        self,
        tid: str,
        instruction: str,
        golden: list[str],
        checks: list[dict[str, Any]],
        tags: list[str],
        apps: list[str] | None = None,
    ) -> dict[str, Any]:
        """A task record (TaskSpec JSON) of this app."""
        apps = apps or [self.app]
        return {
            "id": tid,
            "instruction": instruction,
            "apps": apps,
            "start_app": apps[0],
            "verifier": {"name": "checks", "params": {"checks": checks}},
            "golden": golden,
            "max_steps": len(golden) + 6,
            "tags": tags,
            "split": split_for(apps),
        }

    def task(self, a: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any] | None:
        """One action on one record, from the home screen."""
        opening = self.opening(a["entity"], rec)
        eff = self.effect(a, rec) if opening is not None else None
        if opening is None or eff is None:
            return None
        return self.record(
            f"spec-{self.app}-{a['id']}-{rec['id']}",
            f"In {self.spec['title']}: {eff.what}.",
            [*opening, *eff.steps],
            list(eff.checks),
            ["template:spec_single_action", f"action:{eff.kind}"],
        )


def single_action_tasks(
    spec: dict[str, Any], state: dict[str, Any], per_action: int = 1
) -> list[dict[str, Any]]:
    """Task records (TaskSpec JSON) for up to ``per_action`` records each action of ``spec`` can act on, from
    ``state`` (the app's default state): each one action away from done, as the home screen shows it. Each
    ``create`` action gives one task (its form, filled with values no seed uses)."""
    d = Deriver(spec, state)
    out = []
    for a in spec["actions"]:
        if a["kind"] == "create":
            made = d.create(a)
            if made is not None:
                eff, _ = made
                out.append(
                    d.record(
                        f"spec-{d.app}-{a['id']}-new",
                        f"In {spec['title']}: {eff.what}.",
                        list(eff.steps),
                        list(eff.checks),
                        ["template:spec_single_action", "action:create"],
                    )
                )
            continue
        made = 0
        for rec in d.eligible(a):
            t = d.task(a, rec)
            if t is not None:
                out.append(t)
                made += 1
            if made >= per_action:
                break
    return out
