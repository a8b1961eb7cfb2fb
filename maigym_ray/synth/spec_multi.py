"""Multi-step tasks derived from an app spec: effects of :mod:`maigym_ray.synth.spec_tasks` chained.

Three kinds, each a task whose golden solution is several single-action goldens in a row and whose verifier is
the union of their checks (every one must hold, so doing only part of the task scores 0):

- ``spec_chain``: two or three actions on *different* records of one app ("watch lot A, then pay bill B").
  Effects that touch a common record are never chained: the second's checks were derived from the default
  state, which the first would have changed.
- ``spec_search``: find the record through a list's search box (its title as the query), open it, act on it.
- ``spec_create_then``: create a record, then act on the new record from the screen the create leads to.

Which combinations are taken is deterministic in ``rng_seed`` (a seeded shuffle), so a larger ``limit`` is a
superset of a smaller one.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

from maigym_ray.apps.spec.app import holds
from maigym_ray.synth.spec_tasks import Deriver, Effect, check

#: Kinds that make sense on a record just created (deleting it would leave the initial state).
_AFTER_CREATE = ("update", "toggle", "book", "pay", "transfer")


def _effects(d: Deriver) -> list[tuple[dict[str, Any], dict[str, Any], Effect, list[str]]]:
    """Every (action, record, effect, opening steps) the default state allows, records named unambiguously."""
    out = []
    for a in d.spec["actions"]:
        if a["kind"] == "create":
            continue
        for rec in d.eligible(a):
            opening = d.opening(a["entity"], rec)
            eff = d.effect(a, rec) if opening is not None else None
            if opening is not None and eff is not None:
                out.append((a, rec, eff, opening))
    return out


def chain_tasks(
    spec: dict[str, Any], state: dict[str, Any], limit: int, rng_seed: int = 0, length: int = 2
) -> list[dict[str, Any]]:
    """Up to ``limit`` tasks of ``length`` actions on pairwise-disjoint records of one app."""
    d = Deriver(spec, state)
    effs = _effects(d)
    combos = [
        c
        for c in itertools.combinations(range(len(effs)), length)
        if all(not (effs[i][2].touched & effs[j][2].touched) for i, j in itertools.combinations(c, 2))
    ]
    random.Random(f"{spec['name']}-{length}-{rng_seed}").shuffle(combos)
    out = []
    for c in combos[:limit]:
        parts = [effs[i] for i in c]
        golden = [s for _, _, eff, opening in parts for s in (*opening, *eff.steps)]
        checks = [ch for _, _, eff, _ in parts for ch in eff.checks]
        whats = [eff.what for _, _, eff, _ in parts]
        ids = "-".join(f"{a['id']}.{rec['id']}" for a, rec, _, _ in parts)
        out.append(
            d.record(
                f"spec-{d.app}-chain-{ids}",
                f"In {spec['title']}: " + "; then ".join(whats) + ".",
                golden,
                checks,
                ["template:spec_chain", *(f"action:{eff.kind}" for _, _, eff, _ in parts)],
            )
        )
    return out


def search_tasks(spec: dict[str, Any], state: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` tasks that find a record with a list screen's search box, then act on it."""
    d = Deriver(spec, state)
    out = []
    for a, rec, eff, _ in _effects(d):
        en = a["entity"]
        title_field = d.ents[en]["title_field"]
        screen = next(
            (
                s
                for s in spec["screens"]
                if s["kind"] in ("list", "search")
                and s["entity"] == en
                and title_field in s.get("search", [])
                and ("filter" not in s or holds(s["filter"], rec))
            ),
            None,
        )
        if screen is None:
            continue
        q = d.title(en, rec)
        golden = [
            f'click(id="nav-{screen["id"]}")',
            f'type(id="search-box", text={json.dumps(q, ensure_ascii=False)})',
            'click(id="search")',
            f'click(id="{en}-{rec["id"]}")',
            *eff.steps,
        ]
        where = screen.get("title") or d.ents[en]["label"] + "s"
        out.append(
            d.record(
                f"spec-{d.app}-search-{a['id']}-{rec['id']}",
                f'In {spec["title"]}: search {where} for "{q}", open it, and {eff.what[0].lower()}{eff.what[1:]}.',
                golden,
                list(eff.checks),
                ["template:spec_search", f"action:{eff.kind}"],
            )
        )
        if len(out) >= limit:
            break
    return out


def create_then_tasks(spec: dict[str, Any], state: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` tasks that create a record, then run another action on the new record."""
    d = Deriver(spec, state)
    out = []
    for c in spec["actions"]:
        made = d.create(c) if c["kind"] == "create" else None
        if made is None:
            continue
        cre, rec = made
        for a in spec["actions"]:
            if a["entity"] != c["entity"] or a["kind"] not in _AFTER_CREATE:
                continue
            if not all(holds(p, rec) for p in a.get("preconditions", [])):
                continue
            eff = d.effect(a, rec)
            if eff is None:
                continue
            # the new record must end as created *and* changed: the create's values the action leaves alone
            changed = {k for ch in eff.checks if ch["path"] == c["entity"] for k in ch["match"]}
            kept = {k: v for k, v in cre.checks[0]["match"].items() if k not in changed}
            checks = [check(d.app, c["entity"], {"id": rec["id"], **kept}), *eff.checks]
            out.append(
                d.record(
                    f"spec-{d.app}-create-{c['id']}-then-{a['id']}",
                    f"In {spec['title']}: {cre.what}; then {eff.what}.",
                    [*cre.steps, *eff.steps],
                    checks,
                    ["template:spec_create_then", "action:create", f"action:{eff.kind}"],
                )
            )
            if len(out) >= limit:
                return out
    return out
