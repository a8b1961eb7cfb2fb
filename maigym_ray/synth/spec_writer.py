"""The LLM spec writer: a model drafts a new app spec from a one-line description; checks decide what is kept.

Every draft passes the same gates in order, and the first it fails is its rejection reason:

1. ``bad_json``: the reply holds no JSON object (the first ``{`` is parsed with ``json``: model output is parsed,
   never run);
2. ``bad_spec``: :func:`~maigym_ray.apps.spec.loader.check_spec` (the JSON Schema, then the reference rules)
   refuses it; the record keeps the SpecError's JSON path and rule;
3. ``screen_error`` / ``unreachable_action``: the app, rendered in process, fails to render a screen, or has an
   action that no screen reachable from its home screen offers (:mod:`maigym_ray.apps.spec.reach`, the rule of
   the conformance test);
4. ``no_tasks``: no task derives from it (:func:`~maigym_ray.synth.spec_suite.single_app_tasks`);
5. ``no_valid_tasks``: none of its derived tasks passes validation (the caller's ``validate``: live validation
   on the EnvManager in ``runtime/spec_writing.py``, the gate every synthesised task passes).

A draft that passes all five is kept: ``kept/<app>.json`` (the draft as written, its name made unique) and
``kept/<app>.tasks.parquet`` (its validated tasks). Every draft's reply is kept as text
(``drafts/<draft>.txt``) and every rejection as a record with its stage and reason (``rejected/<draft>.json``);
``spec_writer_report.json`` counts the drafts through each gate and the rejections by reason. A failed request
to the model is ``llm_error`` for that draft; the run goes on.

The model is any ``ask(prompt, episode_id) -> text`` coroutine (``rollout.text_client``: the engine or openai
policy kinds); this module knows no engine and no Ray.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from maigym_ray.apps.registry import register_spec
from maigym_ray.apps.spec import reach
from maigym_ray.apps.spec.app import spec_app_class
from maigym_ray.apps.spec.loader import BUILTIN_DIR, check_spec
from maigym_ray.durable import atomic_write_text
from maigym_ray.errors import SpecError
from maigym_ray.synth.spec_suite import SpecTaskSizes, kind_of, single_app_tasks
from maigym_ray.tasks.pool import TaskPool, task_from_dict
from maigym_ray.types import TaskSpec

#: The gates in order (a draft's ``stage`` is the first it failed, or ``kept``).
STAGES = ("json", "spec", "reach", "tasks", "validation")
#: The existing spec the prompt shows (small, and every action kind it uses is reachable).
EXAMPLE_APP = "phonebook"
#: Few tasks of each kind per draft: enough to show the app works, cheap to validate live.
DRAFT_SIZES = SpecTaskSizes(per_action=1, chains2=1, chains3=0, search=1, create_then=0, answers=2)

ESSENTIALS = """An app spec is one JSON object with exactly these keys:
{"spec_version": 1, "name": N, "title": T, "description": D, "entities": {...}, "screens": [...], "actions": [...]}
- name: lowercase letters, digits, _ (2-31 chars); title: at most 40 chars.
- entities: entity name -> {"label": L, "id_prefix": 1-4 lowercase letters, "title_field": one of its fields,
  "fields": {field name: {"type": T}}, "seed": {"records": [{field: value, ...}, ...]}}.
  A field type is one of string, text, int, money, bool, date (YYYY-MM-DD), enum (needs "values": [...]),
  ref (needs "ref": another entity's name). Give every entity 3 to 6 seed records.
- screens: each {"id": I, "kind": "list" | "search" | "detail", "entity": E, "title": T, "columns": [fields]};
  a search screen also needs "search": [fields]. At least one list screen; every entity an action works on
  needs a list screen (its records are opened from it) and a detail screen (where the actions are).
- actions: each {"id": I, "kind": K, "entity": E, "label": L, ...}: create and update need "fields": [...];
  toggle needs "field" (a bool field); delete needs nothing more; transfer needs "field" (int or money);
  book needs "creates" (an entity) and "link_field" (its ref field to E); pay needs "field", "target"
  ("entity.field", the account balance) and "set" ({field: value} after paying).
- Screen and action ids are distinct lowercase words (a-z, 0-9, - and _)."""

PROMPT = """You design small mock apps for testing phone and computer assistants.
{essentials}

Example spec (another app; yours must be different):
{example}

Write the spec for this app: {description}
Reply with the JSON object only."""


def example_spec() -> str:
    """The example the prompt shows: :data:`EXAMPLE_APP`'s spec file, as compact JSON."""
    raw = json.loads((BUILTIN_DIR / f"{EXAMPLE_APP}.json").read_text())
    raw.pop("icon", None)
    return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))


def build_prompt(description: str) -> str:
    """The prompt for one one-line description."""
    return PROMPT.format(essentials=ESSENTIALS, example=example_spec(), description=description.strip())


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str) -> Any:
    """The first JSON object in a model reply (inside a Markdown code fence if there is one); ValueError when
    there is none. Parsed with ``json``: nothing in the reply is ever run."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = body.find("{")
    if start < 0:
        raise ValueError("no '{' in the reply")
    obj, _ = json.JSONDecoder().raw_decode(body, start)
    return obj


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... when an app of that name exists (kept within the schema's 31)."""
    if name not in taken:
        return name
    k = 2
    while f"{name[:28]}_{k}" in taken:
        k += 1
    return f"{name[:28]}_{k}"


@dataclass
class DraftRecord:
    """One draft: where it got to and, when rejected, why."""

    draft_id: str
    description: str
    attempt: int
    #: the first gate it failed (one of :data:`STAGES`), or "kept"
    stage: str = "json"
    #: "" when kept; else bad_json, bad_spec, screen_error, unreachable_action, no_tasks, no_valid_tasks, llm_error
    reason: str = ""
    detail: str = ""
    #: the JSON path a SpecError names (``$.actions[2].kind``)
    spec_path: str = ""
    #: the app's name as kept (the model's, made unique)
    app: str = ""
    tasks: int = 0
    valid_tasks: int = 0
    #: the spec file written for it ("" when it never parsed)
    file: str = ""

    @property
    def kept(self) -> bool:
        return self.stage == "kept"


@dataclass
class _Candidate:
    """A draft through gates 1-4, waiting for validation."""

    record: DraftRecord
    raw: dict[str, Any]
    tasks: list[TaskSpec] = field(default_factory=list)


#: ``validate(tasks, spec_files) -> verdicts`` (``synth.validation.Verdict``s, any order): validates tasks whose
#: apps are the spec files' apps (every process that hosts them registers the files).
Validate = Callable[[list[TaskSpec], list[Path]], Awaitable[list[Any]]]
Ask = Callable[[str, str], Awaitable[str]]


def _spread(tasks: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Up to ``n`` tasks, taking the kinds in turn (a draft's validation sees every kind it derives)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for t in tasks:
        by_kind.setdefault(kind_of(t), []).append(t)
    out: list[dict[str, Any]] = []
    while len(out) < n and any(by_kind.values()):
        for queue in by_kind.values():
            if queue and len(out) < n:
                out.append(queue.pop(0))
    return out


class SpecWriter:
    """Asks ``ask`` for drafts, checks them, writes the results under ``out_dir``. ``taken``: app names in use
    (a draft named like one is renamed, so a draft never replaces an existing app)."""

    def __init__(
        self, ask: Ask, out_dir: Path, taken: set[str], max_tasks: int = 8, concurrency: int = 1
    ) -> None:
        self.ask, self.out_dir, self.taken, self.max_tasks = ask, Path(out_dir), set(taken), max_tasks
        self.sem = asyncio.Semaphore(max(1, concurrency))
        for sub in ("drafts", "candidates", "kept", "rejected"):
            (self.out_dir / sub).mkdir(parents=True, exist_ok=True)

    # -- gates 1-4: in process ---------------------------------------------------------------------------------
    async def check(self, rec: DraftRecord, reply: str) -> _Candidate | DraftRecord:
        """Gates 1-4 on one reply; a candidate for validation, or ``rec`` rejected."""
        (self.out_dir / "drafts" / f"{rec.draft_id}.txt").write_text(reply)
        try:
            raw = extract_json(reply)
            if not isinstance(raw, dict):
                raise ValueError(f"the JSON is a {type(raw).__name__}, not an object")
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deep to parse
            return self._reject(rec, "json", "bad_json", f"{type(exc).__name__}: {exc}")
        try:
            spec = check_spec(raw, f"{rec.draft_id}.json")
        except SpecError as exc:
            rec.spec_path = exc.path
            return self._reject(rec, "spec", "bad_spec", exc.rule)
        except (RecursionError, TypeError, ValueError) as exc:  # pathological JSON the checker cannot walk
            return self._reject(rec, "spec", "bad_spec", f"{type(exc).__name__}: {exc}")
        rec.app = unique_name(spec["name"], self.taken)
        self.taken.add(rec.app)
        raw, spec = {**raw, "name": rec.app}, {**spec, "name": rec.app}
        path = self.out_dir / "candidates" / f"{rec.app}.json"
        path.write_text(json.dumps(raw, indent=1, ensure_ascii=False))
        rec.file = str(path)
        try:
            app = spec_app_class(spec, str(path))()
            missing = await reach.unreachable_in_process(app)
            state = app.state()
        except Exception as exc:  # the draft's app breaks the renderer: its rejection, never the run's end
            return self._reject(rec, "reach", "screen_error", f"{type(exc).__name__}: {exc}")
        if missing:
            return self._reject(rec, "reach", "unreachable_action", ", ".join(missing))
        try:
            register_spec(path)  # derivation renders its screens (answers are read off them) by app name
            rows = _spread(single_app_tasks(spec, state, DRAFT_SIZES), self.max_tasks)
            tasks = [task_from_dict(t, t["id"]) for t in rows]
        except Exception as exc:  # a draft the derivation cannot read (named, so a bug of ours shows too)
            return self._reject(rec, "tasks", "no_tasks", f"derivation failed: {type(exc).__name__}: {exc}")
        if not tasks:
            return self._reject(rec, "tasks", "no_tasks", "no task derives from the spec")
        rec.tasks = len(tasks)
        return _Candidate(rec, raw, tasks)

    def _reject(self, rec: DraftRecord, stage: str, reason: str, detail: str) -> DraftRecord:
        rec.stage, rec.reason, rec.detail = stage, reason, detail[:1000]
        atomic_write_text(
            self.out_dir / "rejected" / f"{rec.draft_id}.json", json.dumps(asdict(rec), indent=1)
        )
        return rec

    # -- the run -----------------------------------------------------------------------------------------------
    async def draft(self, description: str, i: int, attempt: int) -> _Candidate | DraftRecord:
        """One attempt at description ``i``. Its attempts share an episode id (one engine, one warm prefix)."""
        rec = DraftRecord(f"d{i}-a{attempt}", description, attempt)
        try:
            async with self.sem:  # requests start in draft order (a scripted engine answers in that order)
                reply = await self.ask(build_prompt(description), f"spec-writer-d{i}")
        except Exception as exc:  # any failure of the model's side costs this draft, never the run
            return self._reject(rec, "json", "llm_error", f"{type(exc).__name__}: {exc}")
        return await self.check(rec, reply)

    async def run(
        self, descriptions: Sequence[str], attempts: int, validate: Validate
    ) -> tuple[list[DraftRecord], dict[str, Any]]:
        """Every description ``attempts`` times (``concurrency`` requests at once), then one validation of every
        candidate's tasks; returns the records and the report (also written to ``spec_writer_report.json``)."""
        outs = await asyncio.gather(
            *(self.draft(d, i, k) for i, d in enumerate(descriptions) for k in range(attempts))
        )
        cands = [o for o in outs if isinstance(o, _Candidate)]
        verdicts: dict[str, Any] = {}
        if cands:
            tasks = [t for c in cands for t in c.tasks]
            verdicts = {v.task_id: v for v in await validate(tasks, [Path(c.record.file) for c in cands])}
        for c in cands:
            self._judge(c, [verdicts[t.id] for t in c.tasks if t.id in verdicts])
        records = [o.record if isinstance(o, _Candidate) else o for o in outs]
        report = summarize(records, list(descriptions), attempts)
        with (self.out_dir / "spec_drafts.jsonl").open("w") as f:
            for r in records:
                f.write(json.dumps(asdict(r)) + "\n")
        atomic_write_text(self.out_dir / "spec_writer_report.json", json.dumps(report, indent=2))
        return records, report

    def _judge(self, c: _Candidate, verdicts: list[Any]) -> None:
        rec = c.record
        ok = {v.task_id for v in verdicts if v.ok}
        rec.valid_tasks = len(ok)
        if not ok:
            why = Counter(v.reason for v in verdicts if not v.ok) or Counter({"not validated": len(c.tasks)})
            self._reject(rec, "validation", "no_valid_tasks", json.dumps(dict(why)))
            return
        rec.stage = "kept"
        kept = self.out_dir / "kept" / f"{rec.app}.json"
        kept.write_text(json.dumps(c.raw, indent=1, ensure_ascii=False))
        rec.file = str(kept)
        TaskPool([t for t in c.tasks if t.id in ok]).save(self.out_dir / "kept" / f"{rec.app}.tasks.parquet")


def summarize(records: list[DraftRecord], descriptions: list[str], attempts: int) -> dict[str, Any]:
    """Drafts through each gate, rejections by reason, and the kept apps."""
    passed = {s: 0 for s in STAGES}
    for r in records:
        reached = STAGES.index(r.stage) if r.stage in STAGES else len(STAGES)
        for s in STAGES[:reached]:
            passed[s] += 1
    return {
        "descriptions": descriptions,
        "attempts": attempts,
        "drafts": len(records),
        "passed": passed,
        "kept": sum(r.kept for r in records),
        "kept_apps": [r.app for r in records if r.kept],
        "rejected_by_reason": dict(Counter(r.reason for r in records if not r.kept)),
        "tasks_derived": sum(r.tasks for r in records),
        "tasks_valid": sum(r.valid_tasks for r in records),
    }
