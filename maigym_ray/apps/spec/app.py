"""SpecApp: the one generic :class:`~maigym_ray.apps.app.App` that serves any checked app spec.

The state is one list of records per entity (``{"<entity>": [{"id": ..., <fields>}]}``), seeded from the spec's
expanded seed, so reset, ``state()`` and seeding work exactly as for the hand-written apps. Screens keep their
element-id conventions: ``nav-<screen>``, ``<entity>-<id>`` for a record link, the action id for its button,
the field name for a form input, ``save`` to submit, ``search-box``/``search``, ``<action>-yes``/``-no`` in a
confirmation dialog. A refused action (a precondition, a bad amount) is an error on the screen, never a 500.
"""

from __future__ import annotations

import copy
import hashlib
import json
import operator
from pathlib import Path
from typing import Any, ClassVar

from maigym_ray.apps.app import _TEMPLATES, App, Redirect, Request, Route
from maigym_ray.apps.spec.loader import coerce, default_value, load_spec
from maigym_ray.errors import AppError

_OPS = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
}
#: Actions that run from a record's detail screen; ``create`` runs from the navigation bar.
RECORD_KINDS = ("update", "delete", "toggle", "transfer", "book", "pay")


def holds(cond: dict[str, Any], rec: dict[str, Any]) -> bool:
    """Whether ``rec`` meets one precondition (a type mismatch is simply false, never an exception)."""
    try:
        return bool(_OPS[cond["op"]](rec.get(cond["field"]), cond.get("value")))
    except TypeError:
        return False


class SpecApp(App):
    """Serves ``SPEC``; subclasses are made by :func:`spec_app_class`, one per spec."""

    SPEC: ClassVar[dict[str, Any]]
    SPEC_FILE: ClassVar[str] = ""

    @classmethod
    def default_seed(cls) -> dict[str, Any]:
        # a fresh copy per call, as the hand-written apps give: a caller that edits it never edits the spec
        return copy.deepcopy({en: ent["seed_records"] for en, ent in cls.SPEC["entities"].items()})

    def validated(self, data: dict[str, Any]) -> dict[str, Any]:
        """Also checks every record's fields against the entity's types (a seed error names the record)."""
        merged = super().validated(data)
        for en, recs in merged.items():
            fields = self.SPEC["entities"][en]["fields"]
            for i, rec in enumerate(recs):
                if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
                    raise AppError(f"{self.name}: {en}[{i}] must be an object with a string id")
                for fn, f in fields.items():
                    _, err = coerce(f, rec.get(fn, default_value(f)))
                    if err:
                        raise AppError(f"{self.name}: {en}[{i}].{fn} {err}")
        return merged

    def state_hash(self) -> str:
        """SHA-256 of the canonical JSON of the state: what a reset must restore."""
        return hashlib.sha256(
            json.dumps(self.data, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()

    # -- spec lookups ------------------------------------------------------------------------------------------
    def _screens(self, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        return [s for s in self.SPEC["screens"] if s["kind"] in kinds]

    def _action(self, aid: str) -> dict[str, Any]:
        a = next((a for a in self.SPEC["actions"] if a["id"] == aid), None)
        if a is None:
            raise KeyError(f"action {aid}")
        return a

    def _record(self, en: str, rid: str) -> dict[str, Any]:
        rec = self.find(self.data.get(en, []), "id", rid)
        if rec is None:
            raise KeyError(f"{en} {rid}")
        return rec

    def _new_id(self, en: str) -> str:
        prefix = self.SPEC["entities"][en]["id_prefix"]
        nums = [int(r["id"][len(prefix) :]) for r in self.data[en] if r["id"][len(prefix) :].isdigit()]
        return f"{prefix}{max([*nums, 0]) + 1}"

    def label(self, en: str, rid: Any) -> str:
        """A referenced record's title (ids of other apps' records are shown as they are)."""
        rec = self.find(self.data.get(en, []), "id", rid) if en in self.data else None
        return str(rec[self.SPEC["entities"][en]["title_field"]]) if rec else str(rid)

    def show(self, en: str, fn: str, rec: dict[str, Any]) -> str:
        """A field's value as a screen shows it."""
        f = self.SPEC["entities"][en]["fields"][fn]
        v = rec.get(fn)
        if f["type"] == "bool":
            return "yes" if v else "no"
        if f["type"] == "money":
            return f"€{v}"
        if f["type"] == "ref":
            return self.label(f["ref"], v)
        return "—" if v in ("", None) else str(v)

    # -- rendering ---------------------------------------------------------------------------------------------
    def render(self, template: str, **ctx: Any) -> str:
        nav = self._screens(("list", "search"))
        creates = [a for a in self.SPEC["actions"] if a["kind"] == "create"]
        return _TEMPLATES.get_template(f"spec/{template}").render(
            app=self, base=f"/{self.name}", spec=self.SPEC, nav=nav, creates=creates, **ctx
        )

    def routes(self) -> list[Route]:
        return [
            Route("GET", "/", self.home),
            Route("GET", "/s/{screen}", self.screen),
            Route("GET", "/e/{entity}/{id}", self.detail),
            Route("GET", "/a/{action}/new", self.form),
            Route("POST", "/a/{action}", self.run),
            Route("GET", "/a/{action}/{id}", self.form),
            Route("POST", "/a/{action}/{id}", self.run),
        ]

    def home(self, req: Request) -> str:
        return self._list(self._screens(("list", "search"))[0], req)

    def screen(self, req: Request) -> str:
        s = next((s for s in self.SPEC["screens"] if s["id"] == req.params["screen"]), None)
        if s is None or s["kind"] == "detail":
            raise KeyError(f"screen {req.params['screen']}")
        return self._list(s, req)

    def _list(self, s: dict[str, Any], req: Request) -> str:
        en = s["entity"]
        q = req.query.get("q", "").strip().lower()
        recs = [r for r in self.data[en] if "filter" not in s or holds(s["filter"], r)]
        if q:
            recs = [r for r in recs if any(q in str(r.get(fn, "")).lower() for fn in s.get("search", []))]
        elif s["kind"] == "search":
            recs = []  # a search screen shows results only for a query
        for k in reversed(s.get("sort", [])):
            recs.sort(
                key=lambda r, k=k: (r.get(k["field"]) is None, r.get(k["field"])),
                reverse=k.get("desc", False),
            )
        title = self.SPEC["entities"][en]["title_field"]
        cols = [c for c in s.get("columns", []) if c != title]
        return self.render(
            "list.html", s=s, en=en, recs=recs, cols=cols, title_field=title, q=req.query.get("q", "")
        )

    def _actions_for(self, en: str, rec: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            a
            for a in self.SPEC["actions"]
            if a["entity"] == en
            and a["kind"] in RECORD_KINDS
            and all(holds(c, rec) for c in a.get("preconditions", []))
        ]

    def detail(self, req: Request, error: str = "", flash: str = "") -> str:
        en = req.params["entity"]
        if en not in self.SPEC["entities"]:
            raise KeyError(f"entity {en}")
        rec = self._record(en, req.params["id"])
        ds = next((s for s in self._screens(("detail",)) if s["entity"] == en), None)
        fields = ds["columns"] if ds and ds.get("columns") else list(self.SPEC["entities"][en]["fields"])
        return self.render(
            "detail.html",
            en=en,
            rec=rec,
            fields=fields,
            actions=self._actions_for(en, rec),
            error=error,
            flash=flash,
        )

    # -- actions -----------------------------------------------------------------------------------------------
    def _form_fields(self, a: dict[str, Any]) -> tuple[str, list[str]]:
        en = a["creates"] if a["kind"] == "book" else a["entity"]
        return en, list(a.get("fields", []))

    def form(self, req: Request, error: str = "", values: dict[str, Any] | None = None) -> str:
        a = self._action(req.params["action"])
        rec = self._record(a["entity"], req.params["id"]) if "id" in req.params else None
        if (rec is None) != (a["kind"] == "create"):
            raise KeyError(f"action {a['id']} on this record")
        fen, fields = self._form_fields(a)
        vals = dict(values or {})
        if not vals:
            vals = dict(rec) if rec is not None and a["kind"] == "update" else {}
        choices: dict[str, list[tuple[str, str]]] = {}
        ents = self.SPEC["entities"]
        for fn in fields:
            f = ents[fen]["fields"][fn]
            if f["type"] == "ref" and f["ref"] in self.data:
                choices[fn] = [(r["id"], self.label(f["ref"], r["id"])) for r in self.data[f["ref"]]]
            elif f["type"] == "enum":
                choices[fn] = [(v, v) for v in f["values"]]
        pick: list[tuple[str, str]] = []
        if a["kind"] == "transfer":
            tgt = a.get("target", a["entity"])
            pick = [(r["id"], self.label(tgt, r["id"])) for r in self.data[tgt] if r is not rec]
        if a["kind"] == "pay":
            tent, _, tfield = a["target"].partition(".")
            pick = [(r["id"], f"{self.label(tent, r['id'])} (€{r[tfield]})") for r in self.data[tent]]
        return self.render(
            "form.html",
            a=a,
            rec=rec,
            fen=fen,
            fields=fields,
            vals=vals,
            choices=choices,
            pick=pick,
            error=error,
        )

    def run(self, req: Request) -> Redirect | str:
        a = self._action(req.params["action"])
        en = a["entity"]
        if a["kind"] == "create":
            if "id" in req.params:
                raise KeyError(f"action {a['id']} on a record")
            vals, err = self._read(en, a["fields"], req.form)
            if err:
                return self.form(req, err, req.form)
            ents = self.SPEC["entities"][en]["fields"]
            rec = {"id": self._new_id(en), **{fn: default_value(f) for fn, f in ents.items()}, **vals}
            self.data[en].append(rec)
            return Redirect(f"/e/{en}/{rec['id']}")
        if "id" not in req.params:
            raise KeyError(f"action {a['id']} needs a record")
        rec = self._record(en, req.params["id"])
        if not all(holds(c, rec) for c in a.get("preconditions", [])):
            return self.detail(
                Request(params={"entity": en, "id": rec["id"]}), error=f"{a['label']} is not possible now."
            )
        err = getattr(self, f"_do_{a['kind']}")(a, rec, req)
        if err:
            return self.form(req, err, req.form)
        if a["kind"] == "delete":
            return Redirect("/")
        return Redirect(f"/e/{en}/{rec['id']}")

    def _read(self, en: str, fields: list[str], form: dict[str, str]) -> tuple[dict[str, Any], str]:
        out: dict[str, Any] = {}
        defs = self.SPEC["entities"][en]["fields"]
        for fn in fields:
            f = defs[fn]
            raw = form.get(fn, "false" if f["type"] == "bool" else "").strip()
            label = f.get("label", fn.replace("_", " ").capitalize())
            if f.get("required") and not raw:
                return out, f"{label} is required."
            if (
                f["type"] == "ref"
                and f["ref"] in self.data
                and raw
                and not self.find(self.data[f["ref"]], "id", raw)
            ):
                return out, f"Choose a valid {label.lower()}."
            val, err = coerce(f, raw if raw or f["type"] not in ("int", "money") else "0")
            if err:
                return out, f"{label} {err}."
            out[fn] = val
        return out, ""

    def _do_update(self, a: dict[str, Any], rec: dict[str, Any], req: Request) -> str:
        vals, err = self._read(a["entity"], a["fields"], req.form)
        if not err:
            rec.update(vals, **a.get("set", {}))
        return err

    def _do_delete(self, a: dict[str, Any], rec: dict[str, Any], req: Request) -> str:
        self.data[a["entity"]].remove(rec)
        return ""

    def _do_toggle(self, a: dict[str, Any], rec: dict[str, Any], req: Request) -> str:
        rec[a["field"]] = not rec[a["field"]]
        rec.update(a.get("set", {}))
        return ""

    def _amount(self, req: Request) -> tuple[int, str]:
        raw = req.form.get("amount", "").strip()
        if not raw.isdigit() or int(raw) <= 0:
            return 0, "Amount must be a whole number above 0."
        return int(raw), ""

    def _do_transfer(self, a: dict[str, Any], rec: dict[str, Any], req: Request) -> str:
        amount, err = self._amount(req)
        dest = self.find(self.data[a.get("target", a["entity"])], "id", req.form.get("to", ""))
        if err:
            return err
        if dest is None or dest is rec:
            return "Choose where to transfer to."
        if amount > rec[a["field"]]:
            return "Not enough available."
        rec[a["field"]] -= amount
        dest[a["field"]] += amount
        return ""

    def _do_pay(self, a: dict[str, Any], rec: dict[str, Any], req: Request) -> str:
        tent, _, tfield = a["target"].partition(".")
        acct = self.find(self.data[tent], "id", req.form.get("account", ""))
        if acct is None:
            return "Choose an account to pay from."
        if acct[tfield] < rec[a["field"]]:
            return "Not enough balance on that account."
        acct[tfield] -= rec[a["field"]]
        rec.update(a["set"])
        return ""

    def _do_book(self, a: dict[str, Any], rec: dict[str, Any], req: Request) -> str:
        vals, err = self._read(a["creates"], a.get("fields", []), req.form)
        if err:
            return err
        ents = self.SPEC["entities"][a["creates"]]["fields"]
        new = {"id": self._new_id(a["creates"]), **{fn: default_value(f) for fn, f in ents.items()}, **vals}
        new[a["link_field"]] = rec["id"]
        new.update({dst: rec[src] for dst, src in a.get("copy", {}).items()})
        self.data[a["creates"]].append(new)
        rec.update(a.get("set", {}))
        return ""


def needs_form(a: dict[str, Any]) -> bool:
    """Whether an action opens a form screen (otherwise its button posts directly, or via a confirmation)."""
    return a["kind"] in ("create", "update", "transfer", "pay") or (
        a["kind"] == "book" and bool(a.get("fields"))
    )


def spec_app_class(spec: dict[str, Any], file: str = "") -> type[SpecApp]:
    """A SpecApp subclass serving ``spec`` (already checked by :func:`~maigym_ray.apps.spec.loader.check_spec`)."""
    attrs = {
        "name": spec["name"],
        "title": spec["title"],
        "icon": spec.get("icon", "●"),
        "SCHEMA": dict.fromkeys(spec["entities"], list),
        "SPEC": spec,
        "SPEC_FILE": file,
    }
    return type(f"SpecApp_{spec['name']}", (SpecApp,), attrs)


def load_spec_app(path: str | Path) -> type[SpecApp]:
    """Loads, checks and wraps the spec at ``path`` (a :class:`~maigym_ray.errors.SpecError` if it is bad)."""
    return spec_app_class(load_spec(path), str(path))
