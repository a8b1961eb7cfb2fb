"""Single-action tasks derived from an app spec: one per (action, record) the home screen can reach.

The golden solution and the verifier come from different parts of the spec, so one cannot simply echo the other:
the golden is built from the *screens* (which list shows the record, the element-id conventions of
:mod:`maigym_ray.apps.spec.app`), the verifier from the *action's declared effect* (the field it toggles, the
record it creates, the balance it debits). A task whose golden does not reach its goal is caught by live
validation (``synth/validation.py``), not trusted.
"""

from __future__ import annotations

import json
from typing import Any

from maigym_ray.apps.spec.app import holds

#: What a golden solution types into a field of each type (values no seed uses, so the initial state fails).
_TYPED = {"string": "Alex Doe", "text": "Booked by the agent", "int": "2", "money": "2", "date": "2026-12-24"}


def _check(app: str, path: str, match: dict[str, Any], op: str = "exists") -> dict[str, Any]:
    return {"op": op, "app": app, "path": path, "match": match}


def _coerced(f: dict[str, Any], raw: str) -> Any:
    return int(raw) if f["type"] in ("int", "money") else raw


class _Deriver:
    def __init__(self, spec: dict[str, Any], state: dict[str, Any]) -> None:
        self.spec, self.state, self.app = spec, state, spec["name"]
        self.ents = spec["entities"]

    def screen_for(self, en: str, rec: dict[str, Any]) -> str | None:
        """A list screen (in the nav bar) that shows ``rec`` without a query."""
        for s in self.spec["screens"]:
            if s["kind"] == "list" and s["entity"] == en and ("filter" not in s or holds(s["filter"], rec)):
                return s["id"]
        return None

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
                pick = next((v for v in reversed(f["values"]) if v != now), f["values"][0])
                steps.append(f'click(id="{fn}-{pick}")')
                values[fn] = pick
            elif f["type"] == "bool":
                if not now:
                    steps.append(f'click(id="{fn}")')
                values[fn] = True
            elif f["type"] == "ref":
                continue  # another app's id: not typed by a derived task
            else:
                raw = _TYPED[f["type"]] if str(now) != _TYPED[f["type"]] else "3"
                steps.append(f"type(id={json.dumps(fn)}, text={json.dumps(raw)})")
                values[fn] = _coerced(f, raw)
        return steps, values

    def task(self, a: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any] | None:
        en, kind, app = a["entity"], a["kind"], self.app
        screen = self.screen_for(en, rec)
        if screen is None:
            return None
        title = rec[self.ents[en]["title_field"]]
        label = self.ents[en]["label"].lower()
        steps = [f'click(id="nav-{screen}")', f'click(id="{en}-{rec["id"]}")', f'click(id="{a["id"]}")']
        checks: list[dict[str, Any]] = []
        what = f'{a["label"]} for the {label} "{title}"'
        if kind == "toggle":
            if a.get("confirm"):
                steps.append(f'click(id="{a["id"]}-yes")')
            checks.append(
                _check(app, en, {"id": rec["id"], a["field"]: not rec[a["field"]], **a.get("set", {})})
            )
            what = f'{a["label"]} ({a["field"].replace("_", " ")}: {"off" if rec[a["field"]] else "on"}) for the {label} "{title}"'
        elif kind == "delete":
            steps.append(f'click(id="{a["id"]}-yes")')
            checks.append(_check(app, en, {"id": rec["id"]}, "absent"))
        elif kind == "update":
            fill, values = self.fill(en, a["fields"], rec)
            steps += [*fill, 'click(id="save")']
            checks.append(_check(app, en, {"id": rec["id"], **values, **a.get("set", {})}))
            if values:
                what += ": " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items())
        elif kind == "book":
            fill, values = self.fill(a["creates"], a.get("fields", []), None)
            steps += [*fill, 'click(id="save")'] if a.get("fields") else []
            copied = {dst: rec[src] for dst, src in a.get("copy", {}).items()}
            checks.append(_check(app, a["creates"], {a["link_field"]: rec["id"], **values, **copied}))
            if a.get("set"):
                checks.append(_check(app, en, {"id": rec["id"], **a["set"]}))
            if values:
                what += " (" + ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in values.items()) + ")"
        elif kind == "pay":
            tent, _, tfield = a["target"].partition(".")
            acct = next((r for r in self.state[tent] if r[tfield] >= rec[a["field"]]), None)
            if acct is None:
                return None
            steps += [f'click(id="account-{acct["id"]}")', 'click(id="save")']
            checks.append(_check(app, en, {"id": rec["id"], **a["set"]}))
            checks.append(_check(app, tent, {"id": acct["id"], tfield: acct[tfield] - rec[a["field"]]}))
            what += f' with "{acct[self.ents[tent]["title_field"]]}"'
        elif kind == "transfer":
            tgt = a.get("target", en)
            other = next((r for r in self.state[tgt] if r["id"] != rec["id"]), None)
            if other is None or rec[a["field"]] < 1:
                return None
            steps += [f'click(id="to-{other["id"]}")', 'type(id="amount", text="1")', 'click(id="save")']
            checks.append(_check(app, en, {"id": rec["id"], a["field"]: rec[a["field"]] - 1}))
            checks.append(_check(app, tgt, {"id": other["id"], a["field"]: other[a["field"]] + 1}))
            what += f': move 1 to "{other[self.ents[tgt]["title_field"]]}"'
        else:
            return None
        return {
            "id": f"spec-{app}-{a['id']}-{rec['id']}",
            "instruction": f"In {self.spec['title']}: {what}.",
            "apps": [app],
            "start_app": app,
            "verifier": {"name": "checks", "params": {"checks": checks}},
            "golden": steps,
            "max_steps": len(steps) + 6,
            "tags": ["template:spec_single_action", f"action:{kind}"],
        }


def single_action_tasks(
    spec: dict[str, Any], state: dict[str, Any], per_action: int = 1
) -> list[dict[str, Any]]:
    """Task records (TaskSpec JSON) for up to ``per_action`` records each action of ``spec`` can act on, from
    ``state`` (the app's default state): each one action away from done, as the home screen shows it."""
    d = _Deriver(spec, state)
    out = []
    for a in spec["actions"]:
        if a["kind"] == "create":
            continue
        ok = [r for r in state[a["entity"]] if all(holds(c, r) for c in a.get("preconditions", []))]
        made = 0
        for rec in ok:
            t = d.task(a, rec)
            if t is not None:
                out.append(t)
                made += 1
            if made >= per_action:
                break
    return out
