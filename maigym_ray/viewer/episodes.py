"""Episodes of a run: an index of small columns per Parquet part, filters, sorting, paging, and one episode.

Large runs stay cheap: the index reads only scalar columns (plus each turn's ``parse_error``) with column
projection and caches them per part file, keyed by its size and mtime, so a poll rereads only new parts. One
episode is read by streaming its part in small batches without the screenshot column; one screenshot is read
the same way with only that column. Nothing ever holds a whole run.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from maigym_ray.harness.history import prompt_windows
from maigym_ray.viewer.overlay import overlay
from maigym_ray.viewer.rundir import RunDir, Store

_PART = re.compile(r"part-\d{5}\.parquet")
_INDEX_COLS = [
    "episode_id",
    "task_id",
    "platform",
    "policy_version",
    "reward",
    "success",
    "reason",
    "infra_failed",
    "error",
    "num_steps",
    "turns.list.element.parse_error",
]
#: Turn fields the step view reads (never the screenshot bytes, never the token ids themselves).
_TURN_FIELDS = ("index", "action_text", "parse_error", "policy_s", "env_s", "cached_tokens")
#: Text fields of a turn that stores written before they existed lack: the page says "not recorded".
_TEXT_FIELDS = ("a11y", "prompt_text", "prompt_continued", "response_text")
_BATCH = 8
SORTS = ("reward", "steps", "order")
OUTCOMES = ("success", "failure", "infra_failed")


@dataclass(frozen=True)
class Filter:
    """What the Episodes page asks for; empty strings match everything."""

    app: str = ""
    task: str = ""
    split: str = ""
    outcome: str = ""
    round: str = ""
    sort: str = "order"
    descending: bool = False


def outcome(row: dict[str, Any]) -> str:
    """One of OUTCOMES: infra failures are neither successes nor failures."""
    if row["infra_failed"]:
        return "infra_failed"
    return "success" if row["success"] else "failure"


class EpisodeIndex:
    """The episodes of one run, indexed by small columns; ``query`` filters, sorts and pages."""

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self._parts: dict[Path, tuple[tuple[int, int], list[dict[str, Any]]]] = {}

    def _part_rows(
        self, store: Store, part: Path, results: dict[str, dict[str, Any]]
    ) -> list[dict[str, Any]]:
        st = part.stat()
        key = (st.st_size, st.st_mtime_ns)
        cached = self._parts.get(part)
        if cached is None or cached[0] != key:
            f = pq.ParquetFile(part)
            table = f.read(columns=_INDEX_COLS)
            rows = []
            for i, r in enumerate(table.to_pylist()):
                turns = r.pop("turns") or []
                r["parse_errors"] = sum(1 for t in turns if t.get("parse_error"))
                r["row"] = i
                rows.append(r)
            cached = (key, rows)
            self._parts[part] = cached
        out = []
        for r in cached[1]:
            res = results.get(r["episode_id"], {})
            out.append(
                {
                    **r,
                    "store": store.name,
                    "part": part.name,
                    "round": store.round,
                    "split": res.get("split") or store.split,
                    "app": res.get("app") or "",
                    "outcome": outcome(r),
                }
            )
        return out

    def all(self) -> list[dict[str, Any]]:
        """Every episode's index row, in store and part order."""
        results = self.run.results()
        rows: list[dict[str, Any]] = []
        for store in self.run.stores():
            for part in sorted(store.path.glob("part-*.parquet")):
                rows.extend(self._part_rows(store, part, results))
        if not rows:  # an eval run keeps no trajectories: its results still list, filter and compare
            rows = [_result_row(r) for r in results.values()]
        return rows

    def facets(self, rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
        """The values each filter can take in this run."""
        return {
            "app": sorted({r["app"] for r in rows if r["app"]}),
            "task": sorted({r["task_id"] for r in rows}),
            "split": sorted({r["split"] for r in rows if r["split"]}),
            "outcome": list(OUTCOMES),
            "round": sorted({r["round"] for r in rows if r["round"] is not None}),
        }

    def query(self, flt: Filter, page: int = 0, size: int = 50) -> dict[str, Any]:
        """One page of the episodes that match ``flt``, sorted, with the total and the facets."""
        rows = self.all()
        facets = self.facets(rows)
        sel = [
            r
            for r in rows
            if (not flt.app or r["app"] == flt.app)
            and (not flt.task or r["task_id"] == flt.task)
            and (not flt.split or r["split"] == flt.split)
            and (not flt.outcome or r["outcome"] == flt.outcome)
            and (not flt.round or str(r["round"]) == flt.round)
        ]
        if flt.sort == "reward":
            sel.sort(key=lambda r: r["reward"], reverse=flt.descending)
        elif flt.sort == "steps":
            sel.sort(key=lambda r: r["num_steps"], reverse=flt.descending)
        elif flt.descending:
            sel.reverse()
        size = max(1, min(size, 500))
        return {
            "total": len(sel),
            "page": page,
            "size": size,
            "episodes": sel[page * size : (page + 1) * size],
            "facets": facets,
        }

    def locate(self, store: str, part: str) -> Path:
        """The part file of a store, checked against what the run holds (no path comes from the request)."""
        for s in self.run.stores():
            if s.name == store and _PART.fullmatch(part) and (s.path / part).is_file():
                return s.path / part
        raise KeyError(f"no part {part!r} in store {store!r}")

    def episode(self, store: str, part: str, row: int, step: int | None = None) -> dict[str, Any]:
        """One episode: its index row and every turn (no screenshot bytes), each with its action overlay.
        The texts (accessibility text, whole prompt window, reply) come with step ``step`` only (every step
        when None), so stepping through a long episode never ships every window; a store without a text
        column leaves that key out."""
        path = self.locate(store, part)
        f = pq.ParquetFile(path)
        turn_type = f.schema_arrow.field("turns").type.value_type
        names = {turn_type.field(i).name for i in range(turn_type.num_fields)}
        texts = [n for n in _TEXT_FIELDS if n in names]
        cols = [c for c in _INDEX_COLS if not c.startswith("turns.")]
        cols += [f"turns.list.element.{n}" for n in (*_TURN_FIELDS, *texts)]
        cols += ["turns.list.element.prompt_ids", "turns.list.element.response_ids"]
        r = _row(f, cols, row)
        turns = r.pop("turns") or []
        if "prompt_text" in names:
            windows = prompt_windows(
                (t["prompt_text"], t.get("prompt_continued"), t.get("response_text")) for t in turns
            )
            start = 0
            for k, (t, w) in enumerate(zip(turns, windows, strict=True)):
                start = start if t.get("prompt_continued") else k
                t["prompt_text"] = w
                t["prompt_window_from"] = start  # the step whose prompt began this window
        if step is not None:  # the page asks past the end for a step it clamps to the last
            step = min(max(step, 0), len(turns) - 1)
        for k, t in enumerate(turns):
            t.pop("prompt_continued", None)
            if step is not None and k != step:
                for n in (*texts, "prompt_window_from"):
                    t.pop(n, None)
            t["prompt_tokens"] = len(t.pop("prompt_ids") or [])
            t["response_tokens"] = len(t.pop("response_ids") or [])
            t["overlay"] = overlay(t["action_text"])
        store_info = next(s for s in self.run.stores() if s.name == store)
        res = self.run.results().get(r["episode_id"], {})
        return {
            **r,
            "store": store,
            "part": part,
            "row": row,
            "round": store_info.round,
            "split": res.get("split") or store_info.split,
            "app": res.get("app") or "",
            "outcome": outcome(r),
            "turns": turns,
        }

    def screenshot(self, store: str, part: str, row: int, step: int) -> bytes:
        """The PNG bytes of one step's screenshot (b"" when the run did not keep screenshots)."""
        f = pq.ParquetFile(self.locate(store, part))
        r = _row(f, ["turns.list.element.screenshot"], row)
        turns = r["turns"] or []
        return (turns[step].get("screenshot") or b"") if 0 <= step < len(turns) else b""


def _result_row(r: dict[str, Any]) -> dict[str, Any]:
    """An index row from a results.parquet row (no steps to open: ``row`` is -1)."""
    out = {**r, "num_steps": r["steps"], "policy_version": None, "store": "", "part": "", "row": -1}
    return {**out, "round": None, "outcome": outcome(r)}


def _row(f: pq.ParquetFile, columns: list[str], row: int) -> dict[str, Any]:
    """Row ``row`` of a part, streamed in small batches so that only a batch is ever decoded at once."""
    if row < 0 or row >= f.metadata.num_rows:
        raise KeyError(f"no row {row}")
    seen = 0
    for batch in f.iter_batches(batch_size=_BATCH, columns=columns):
        if row < seen + batch.num_rows:
            return batch.slice(row - seen, 1).to_pylist()[0]
        seen += batch.num_rows
    raise KeyError(f"no row {row}")


def thumbnail(png: bytes, width: int = 240) -> bytes:
    """A small PNG of a screenshot (made on demand; the viewer caches a few)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png))
    img.thumbnail((width, width * 4))
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=True)
    return out.getvalue()
