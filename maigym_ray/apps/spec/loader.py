"""Loading an app spec: JSON Schema first (shape), then the cross-reference rules a schema cannot say.

Every failure is a :class:`~maigym_ray.errors.SpecError` naming the file, the JSON path (``$.actions[2].field``)
and the rule, raised at load time, so a bad spec never reaches the app host as a 500 page. Seed generators are
expanded here too, deterministically (a seeded ``random.Random``), so the default seed of a spec app is data.
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from maigym_ray.errors import SpecError

SCHEMA_PATH = Path(__file__).parent / "schema.json"
#: The spec files that ship with the package (one app each).
BUILTIN_DIR = Path(__file__).parent.parent / "specs"
NUMERIC = ("int", "money")


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def _jpath(parts: Any) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def load_spec(path: str | Path) -> dict[str, Any]:
    """Reads and checks the spec at ``path``; returns it with seeds expanded (``entities.*.seed_records``)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise SpecError(str(path), "$", f"cannot read the file ({exc.strerror})") from exc
    except ValueError as exc:
        raise SpecError(str(path), "$", f"not JSON ({exc})") from exc
    return check_spec(raw, str(path))


def check_spec(spec: Any, file: str = "<spec>") -> dict[str, Any]:
    """Checks ``spec`` (already parsed) against the schema and the reference rules; returns an expanded copy."""
    errors = sorted(
        _validator().iter_errors(spec), key=lambda e: (len(e.absolute_path), list(map(str, e.path)))
    )
    if errors:
        # the deepest error is the most specific one ("$.actions[1].kind: 'fly' is not one of ...")
        e = max(errors, key=lambda e: len(e.absolute_path))
        raise SpecError(file, _jpath(e.absolute_path), f"schema: {e.message}")
    spec = json.loads(json.dumps(spec))
    _Rules(spec, file).check()
    for name, ent in spec["entities"].items():
        ent["seed_records"] = _seed(spec, name, file)
    return spec


class _Rules:
    """The rules between parts of a spec (every name it uses must exist and have the right type)."""

    def __init__(self, spec: dict[str, Any], file: str) -> None:
        self.spec, self.file = spec, file
        self.ents: dict[str, Any] = spec["entities"]

    def fail(self, path: str, rule: str) -> None:
        raise SpecError(self.file, path, rule)

    def field(self, ent: str, name: str, path: str, types: tuple[str, ...] = ()) -> dict[str, Any]:
        fields = self.ents[ent]["fields"]
        if name not in fields:
            self.fail(path, f"entity {ent!r} has no field {name!r}; fields: {', '.join(fields)}")
        if types and fields[name]["type"] not in types:
            self.fail(path, f"field {ent}.{name} must be of type {' or '.join(types)}")
        return fields[name]

    def entity(self, name: str, path: str) -> None:
        if name not in self.ents:
            self.fail(path, f"no entity {name!r}; entities: {', '.join(self.ents)}")

    def check(self) -> None:
        for en, ent in self.ents.items():
            base = f"$.entities.{en}"
            self.field(en, ent["title_field"], f"{base}.title_field")
            for fn, f in ent["fields"].items():
                ref = f.get("ref")
                if f["type"] == "ref" and ":" not in ref:
                    self.entity(ref, f"{base}.fields.{fn}.ref")
                if f["type"] == "enum" and "default" in f and f["default"] not in f["values"]:
                    self.fail(f"{base}.fields.{fn}.default", "an enum default must be one of its values")
        ids: set[str] = set()
        lists = 0
        for i, s in enumerate(self.spec["screens"]):
            p = f"$.screens[{i}]"
            if s["id"] in ids:
                self.fail(f"{p}.id", f"duplicate screen id {s['id']!r}")
            ids.add(s["id"])
            self.entity(s["entity"], f"{p}.entity")
            lists += s["kind"] in ("list", "search")
            for key in ("columns", "search"):
                for j, fn in enumerate(s.get(key, [])):
                    self.field(s["entity"], fn, f"{p}.{key}[{j}]")
            for j, k in enumerate(s.get("sort", [])):
                self.field(s["entity"], k["field"], f"{p}.sort[{j}].field")
            if "filter" in s:
                self.field(s["entity"], s["filter"]["field"], f"{p}.filter.field")
        if not lists:
            self.fail("$.screens", "needs at least one list or search screen (the app's home screen)")
        for i, a in enumerate(self.spec["actions"]):
            self.action(a, f"$.actions[{i}]", ids)

    def action(self, a: dict[str, Any], p: str, ids: set[str]) -> None:
        if a["id"] in ids:
            self.fail(f"{p}.id", f"duplicate id {a['id']!r} (screen and action ids share one namespace)")
        ids.add(a["id"])
        en, kind = a["entity"], a["kind"]
        self.entity(en, f"{p}.entity")
        form_ent = a.get("creates", en) if kind == "book" else en
        for j, fn in enumerate(a.get("fields", [])):
            self.field(form_ent, fn, f"{p}.fields[{j}]")  # a book form fills the record it creates
        for j, c in enumerate(a.get("preconditions", [])):
            self.field(en, c["field"], f"{p}.preconditions[{j}].field")
        for fn in a.get("set", {}):
            self.field(en, fn, f"{p}.set.{fn}")
        if kind == "toggle":
            self.field(en, a["field"], f"{p}.field", ("bool",))
        if kind == "transfer":
            self.field(en, a["field"], f"{p}.field", NUMERIC)
            tgt = a.get("target", en)
            self.entity(tgt, f"{p}.target")
            self.field(tgt, a["field"], f"{p}.target", NUMERIC)
        if kind == "pay":
            self.field(en, a["field"], f"{p}.field", NUMERIC)
            tent, _, tfield = a["target"].partition(".")
            if not tfield:
                self.fail(f"{p}.target", "a pay target is 'entity.field' (the account and its balance)")
            self.entity(tent, f"{p}.target")
            self.field(tent, tfield, f"{p}.target", NUMERIC)
        if kind == "book":
            self.entity(a["creates"], f"{p}.creates")
            link = self.field(a["creates"], a["link_field"], f"{p}.link_field", ("ref",))
            if link["ref"] != en:
                self.fail(f"{p}.link_field", f"{a['creates']}.{a['link_field']} must reference {en!r}")
            for dst, src in a.get("copy", {}).items():
                self.field(a["creates"], dst, f"{p}.copy.{dst}")
                self.field(en, src, f"{p}.copy.{dst}")


def default_value(f: dict[str, Any]) -> Any:
    """A field's value when a form or seed leaves it out."""
    if "default" in f:
        return f["default"]
    return {"int": 0, "money": 0, "bool": False, "enum": (f.get("values") or [""])[0]}.get(f["type"], "")


def coerce(f: dict[str, Any], value: Any) -> tuple[Any, str]:
    """``value`` (a form string or seed datum) as the field's type, or ``(None, reason)``."""
    t = f["type"]
    if t in NUMERIC:
        if isinstance(value, bool):
            return None, "must be a number"
        if isinstance(value, int):
            return value, ""
        try:
            return int(str(value).strip()), ""
        except ValueError:
            return None, "must be a whole number"
    if t == "bool":
        if isinstance(value, bool):
            return value, ""
        word = str(value).strip().lower()
        if word not in ("1", "true", "on", "yes", "0", "false", "off", "no", ""):
            return None, "must be true or false"
        return word in ("1", "true", "on", "yes"), ""
    if not isinstance(value, str):
        return None, "must be text"
    if t == "enum" and value not in f["values"]:
        return None, f"must be one of {', '.join(f['values'])}"
    if t == "date" and value and not (len(value) == 10 and value[4] == "-" and value[7] == "-"):
        return None, "must be a date YYYY-MM-DD"
    return value, ""


def _seed(spec: dict[str, Any], en: str, file: str) -> list[dict[str, Any]]:
    ent = spec["entities"][en]
    seed = ent.get("seed", {})
    fields = ent["fields"]
    out: list[dict[str, Any]] = []
    for i, rec in enumerate(seed.get("records", [])):
        p = f"$.entities.{en}.seed.records[{i}]"
        unknown = set(rec) - set(fields) - {"id"}
        if unknown:
            raise SpecError(file, p, f"unknown field(s) {sorted(unknown)}")
        row = {"id": rec.get("id", f"{ent['id_prefix']}{len(out) + 1}")}
        for fn, f in fields.items():
            val, err = coerce(f, rec.get(fn, default_value(f)))
            if err:
                raise SpecError(file, f"{p}.{fn}", err)
            row[fn] = val
        out.append(row)
    gen = seed.get("generate")
    if gen:
        rng = random.Random(gen.get("rng_seed", 0))
        for fn in gen["fields"]:
            if fn not in fields:
                raise SpecError(file, f"$.entities.{en}.seed.generate.fields.{fn}", f"no field {fn!r}")
        for _ in range(gen["count"]):
            n = len(out) + 1
            row = {"id": f"{ent['id_prefix']}{n}"}
            for fn, f in fields.items():
                g = gen["fields"].get(fn)
                p = f"$.entities.{en}.seed.generate.fields.{fn}"
                if g is None:
                    val: Any = default_value(f)
                elif "const" in g:
                    val = g["const"]
                elif "pick" in g:
                    val = rng.choice(g["pick"])
                elif "range" in g:
                    val = rng.randint(*sorted(g["range"]))
                elif "pattern" in g:
                    val = g["pattern"].format(i=n)
                else:
                    ref = g["ref"]
                    pool = spec["entities"].get(ref, {}).get("seed_records")
                    if not pool:
                        raise SpecError(
                            file, p, f"ref generator needs seeded entity {ref!r} declared earlier"
                        )
                    val = rng.choice(pool)["id"]
                val, err = coerce(f, val)
                if err:
                    raise SpecError(file, p, err)
                row[fn] = val
            out.append(row)
    return out
