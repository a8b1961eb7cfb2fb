"""Task pools: TaskSpecs on disk (Parquet through pyarrow, or JSON Lines for hand-written tasks).

Parquet schema (one row per task)::

    id: string            instruction: string        apps: list<string>       platforms: list<string>
    initial_state: string (JSON object: app -> seed)  start_app: string
    verifier: string (JSON object)                    golden: list<string>     max_steps: int32
    tags: list<string>    split: string

A malformed file raises :class:`TaskError` naming the row and the field, and loads nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from maigym_ray.durable import atomic_path
from maigym_ray.errors import TaskError
from maigym_ray.plugins import Registry
from maigym_ray.types import PLATFORMS, TaskSpec

BUILTIN_DIR = Path(__file__).parent / "builtin"

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("instruction", pa.string()),
        ("apps", pa.list_(pa.string())),
        ("platforms", pa.list_(pa.string())),
        ("initial_state", pa.string()),
        ("start_app", pa.string()),
        ("verifier", pa.string()),
        ("golden", pa.list_(pa.string())),
        ("max_steps", pa.int32()),
        ("tags", pa.list_(pa.string())),
        ("split", pa.string()),
    ]
)

_REQUIRED = ("id", "instruction", "apps", "verifier")

#: Task sources that are not files, by spec prefix (``miniwob:click-button,click-link``): the function that turns
#: the whole spec into TaskSpecs (entry-point group ``maigym_ray.pool_sources``). Imported on use, so an outside
#: suite needs its extra only when used.
POOL_SOURCES: Registry[Callable[[str], Iterable[TaskSpec]]] = Registry("pool_sources", "task source")


def task_from_dict(row: dict[str, Any], where: str = "row") -> TaskSpec:
    """Validates one raw row and builds a TaskSpec; errors name ``where`` and the field."""

    def bad(field: str, msg: str) -> TaskError:
        return TaskError(f"{where}: field {field!r} {msg}")

    if not isinstance(row, dict):
        raise TaskError(f"{where}: expected an object, got {type(row).__name__}")
    for f in _REQUIRED:
        if f not in row or row[f] in (None, ""):
            raise bad(f, "is missing")
    unknown = set(row) - set(SCHEMA.names)
    if unknown:
        raise bad(sorted(unknown)[0], f"is not a TaskSpec field; valid: {', '.join(SCHEMA.names)}")
    out: dict[str, Any] = {}
    for f in ("id", "instruction", "start_app", "split"):
        if f in row and not isinstance(row[f], str):
            raise bad(f, "must be a string")
        if f in row:
            out[f] = row[f]
    for f in ("apps", "platforms", "golden", "tags"):
        if f in row:
            v = row[f]
            if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
                raise bad(f, "must be a list of strings")
            out[f] = tuple(v)
    for f in ("initial_state", "verifier"):
        v = row[f] if f in row else {}
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError as exc:
                raise bad(f, f"is not valid JSON ({exc.msg})") from exc
        if not isinstance(v, dict):
            raise bad(f, "must be an object")
        out[f] = v
    if "max_steps" in row:
        if (
            isinstance(row["max_steps"], bool)
            or not isinstance(row["max_steps"], int)
            or row["max_steps"] < 1
        ):
            raise bad("max_steps", "must be a positive integer")
        out["max_steps"] = row["max_steps"]
    if not out["apps"]:
        raise bad("apps", "must name at least one app")
    from maigym_ray.apps.registry import APP_CLASSES

    unknown_apps = [a for a in out["apps"] if a not in APP_CLASSES]
    if unknown_apps:
        raise bad("apps", f"has unknown app(s) {unknown_apps}; valid: {', '.join(sorted(APP_CLASSES))}")
    for p in out.get("platforms", ()):
        if p not in PLATFORMS:
            raise bad("platforms", f"has unknown platform {p!r}; valid: {', '.join(PLATFORMS)}")
    if out.get("start_app") and out["start_app"] not in out["apps"]:
        raise bad("start_app", f"{out['start_app']!r} is not one of the task's apps")
    _check_parts(out, bad)
    return TaskSpec(**out)


def _check_parts(out: dict[str, Any], bad: Callable[[str, str], TaskError]) -> None:
    """The checks that need the task's parts built: the verifier (an unknown check op), each app's seed (a key
    of the wrong type) and each golden action (one that does not parse). Done at load so a typo in a task file
    is an error naming the file, the line and the field, not an episode scored 0 with the reason buried in
    results.parquet."""
    from maigym_ray.actions import parse_action
    from maigym_ray.apps.registry import APP_CLASSES
    from maigym_ray.errors import ActionParseError, AppError
    from maigym_ray.tasks.verifiers import build_verifier

    try:
        build_verifier(out["verifier"])
    except TaskError as exc:
        raise bad("verifier", str(exc)) from None
    for app, seed in out.get("initial_state", {}).items():
        if app not in APP_CLASSES:  # a backend's own seed (``desktop`` files): its backend checks it at reset
            continue
        try:
            APP_CLASSES[app]().validated(seed)
        except AppError as exc:
            raise bad(f"initial_state.{app}", str(exc)) from None
    for i, action in enumerate(out.get("golden", ())):
        try:
            parse_action(action)
        except ActionParseError as exc:
            raise bad(f"golden[{i}]", f"{action!r} does not parse: {exc}") from None


def task_to_row(t: TaskSpec) -> dict[str, Any]:
    """The Parquet row of a TaskSpec (JSON-encoded nested objects)."""
    return {
        "id": t.id,
        "instruction": t.instruction,
        "apps": list(t.apps),
        "platforms": list(t.platforms),
        "initial_state": json.dumps(t.initial_state, sort_keys=True),
        "start_app": t.start_app,
        "verifier": json.dumps(t.verifier, sort_keys=True),
        "golden": list(t.golden),
        "max_steps": t.max_steps,
        "tags": list(t.tags),
        "split": t.split,
    }


class TaskPool:
    """An ordered, id-indexed set of tasks. Unknown ids raise :class:`TaskError`."""

    def __init__(self, tasks: Iterable[TaskSpec]) -> None:
        self._tasks: dict[str, TaskSpec] = {}
        for t in tasks:
            if t.id in self._tasks:
                raise TaskError(f"duplicate task id {t.id!r}")
            self._tasks[t.id] = t

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[TaskSpec]:
        return iter(self._tasks.values())

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def get(self, task_id: str) -> TaskSpec:
        """The task with ``task_id``; a TaskError that names close ids if there is none."""
        try:
            return self._tasks[task_id]
        except KeyError:
            near = [i for i in self._tasks if i.split("-")[0] == str(task_id).split("-")[0]][:5]
            raise TaskError(f"unknown task {task_id!r}" + (f"; similar: {near}" if near else "")) from None

    def filter(
        self, *, split: str | None = None, apps: Iterable[str] | None = None, platform: str | None = None
    ) -> TaskPool:
        """The sub-pool of one split, of tasks on the given apps only, and/or on one platform."""
        allowed = set(apps) if apps is not None else None
        return TaskPool(
            t
            for t in self
            if (split is None or t.split == split)
            and (allowed is None or set(t.apps) <= allowed)
            and (platform is None or platform in t.platforms)
        )

    # -- I/O ------------------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> TaskPool:
        """Loads a ``.parquet`` or ``.jsonl`` pool, every ``*.jsonl`` in a folder, or a registered source's spec
        (:data:`POOL_SOURCES`, e.g. ``miniwob:all``)."""
        prefix = str(path).split(":", 1)[0]
        if prefix in POOL_SOURCES and ":" in str(path) and not Path(path).exists():
            return cls(POOL_SOURCES.load(prefix)(str(path)))
        path = Path(path)
        if path.is_dir():
            files = sorted(path.glob("*.jsonl")) + sorted(path.glob("*.parquet"))
            return cls(t for f in files for t in cls.load(f))
        if not path.exists():
            raise TaskError(f"task file {path} does not exist")
        if path.suffix == ".parquet":
            try:
                rows = pq.read_table(path).to_pylist()
            except (pa.ArrowInvalid, OSError) as exc:
                raise TaskError(f"{path}: not a readable Parquet task file ({exc})") from exc
            return cls(
                task_from_dict({k: v for k, v in r.items() if v is not None}, f"{path} row {i}")
                for i, r in enumerate(rows)
            )
        tasks = []
        for i, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskError(f"{path} line {i}: not valid JSON ({exc.msg})") from exc
            tasks.append(task_from_dict(row, f"{path} line {i}"))
        return cls(tasks)

    @classmethod
    def builtin(cls) -> TaskPool:
        """The hand-written tasks that ship with the mocked apps."""
        return cls.load(BUILTIN_DIR)

    def save(self, path: str | Path) -> None:
        """Writes the pool as Parquet with :data:`SCHEMA`, crash-safely: a crash leaves the old file or the
        new one, never a truncated one (temp file, fsync, rename, fsync the directory)."""
        table = pa.Table.from_pylist([task_to_row(t) for t in self], schema=SCHEMA)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
