"""Trajectory store: trajectories as Parquet part files that a run appends while it goes on.

Layout: ``DIR/part-NNNNN.parquet``. Every ``flush`` closes one part file, so whatever a crashed run had
flushed stays readable. Parts are written to a hidden temporary file, fsynced, and published under the next
free number without ever replacing a part (:func:`maigym_ray.durable.publish_new`): a gap in the numbers or a
second writer never costs an episode. A part that is unreadable anyway (a truncated file from a crash before
this, a disk error) is skipped with a warning by the reader, never half-loaded. Schema, one row per episode::

    episode_id string      task_id string      platform string     policy_version int64
    reward float64         success bool        reason string
    infra_failed bool      error string        num_steps int32
    turns list<struct<
        index int32, action_text string, parse_error string,
        prompt_ids list<int32>, response_ids list<int32>, logprobs list<float32>,
        screenshot binary (empty unless kept), policy_s float64, env_s float64,
        cached_tokens int32 (prompt tokens the engine served from its prefix cache),
        a11y string (the accessibility text the policy read), response_text string (the whole reply),
        prompt_text string, prompt_continued bool,
        constraint string (the regex the reply was sampled under, "" when free),
        policy_version int64 (the weights the reply's request started on)>>

The prompt text is compact: inside a history window a step's prompt is the previous step's prompt and response
followed by its observation turn, so such a step (``prompt_continued``) keeps only that turn, and a window's
text is stored once (``maigym_ray.harness.history.prompt_windows`` rebuilds each step's window). Parts are
zstd-compressed: consecutive steps' accessibility texts are mostly equal and compress to little. Stores written
before the text columns existed still read: those fields come back empty (the viewer says "not recorded").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from maigym_ray.actions import parse_action
from maigym_ray.durable import publish_new
from maigym_ray.types import Reward, Trajectory, Turn

TURN = pa.struct(
    [
        ("index", pa.int32()),
        ("action_text", pa.string()),
        ("parse_error", pa.string()),
        ("prompt_ids", pa.list_(pa.int32())),
        ("response_ids", pa.list_(pa.int32())),
        ("logprobs", pa.list_(pa.float32())),
        ("screenshot", pa.binary()),
        ("policy_s", pa.float64()),
        ("env_s", pa.float64()),
        ("cached_tokens", pa.int32()),
        ("a11y", pa.string()),
        ("response_text", pa.string()),
        ("prompt_text", pa.string()),
        ("prompt_continued", pa.bool_()),
        ("constraint", pa.string()),
        ("policy_version", pa.int64()),
    ]
)
SCHEMA = pa.schema(
    [
        ("episode_id", pa.string()),
        ("task_id", pa.string()),
        ("platform", pa.string()),
        ("policy_version", pa.int64()),
        ("reward", pa.float64()),
        ("success", pa.bool_()),
        ("reason", pa.string()),
        ("infra_failed", pa.bool_()),
        ("error", pa.string()),
        ("num_steps", pa.int32()),
        ("turns", pa.list_(TURN)),
    ]
)


_log = logging.getLogger(__name__)
_PART = re.compile(r"part-(\d+)\.parquet")


def _part_name(n: int) -> str:
    return f"part-{n:05d}.parquet"


def to_row(t: Trajectory) -> dict[str, Any]:
    """One Parquet row of a trajectory."""
    return {
        "episode_id": t.episode_id,
        "task_id": t.task_id,
        "platform": t.platform,
        "policy_version": t.policy_version,
        "reward": t.reward.value,
        "success": t.reward.success,
        "reason": t.reward.reason,
        "infra_failed": t.infra_failed,
        "error": t.error,
        "num_steps": len(t.turns),
        "turns": [
            {
                "index": u.index,
                "action_text": u.action_text,
                "parse_error": u.parse_error,
                "prompt_ids": list(u.prompt_ids),
                "response_ids": list(u.response_ids),
                "logprobs": list(u.logprobs),
                "screenshot": u.screenshot,
                "policy_s": u.timings.get("policy_s", 0.0),
                "env_s": u.timings.get("env_s", 0.0),
                "cached_tokens": int(u.timings.get("cached_tokens", 0)),
                "a11y": u.a11y,
                "response_text": u.response_text,
                "prompt_text": u.prompt_text,
                "prompt_continued": u.prompt_continued,
                "constraint": u.constraint,
                "policy_version": u.policy_version,
            }
            for u in t.turns
        ],
    }


def _action(text: str) -> Any:
    try:
        return parse_action(text)
    except Exception:  # a stored mistake stays a mistake: no action
        return None


def from_row(r: dict[str, Any]) -> Trajectory:
    """The Trajectory of one Parquet row."""
    turns = tuple(
        Turn(
            index=u["index"],
            action_text=u["action_text"],
            action=_action(u["action_text"]),
            parse_error=u["parse_error"],
            prompt_ids=tuple(u["prompt_ids"]),
            response_ids=tuple(u["response_ids"]),
            logprobs=tuple(u["logprobs"]),
            screenshot=u["screenshot"] or b"",
            timings={
                "policy_s": u["policy_s"],
                "env_s": u["env_s"],
                "cached_tokens": float(u["cached_tokens"]),
            },
            # absent (None) in stores written before these columns existed
            a11y=u.get("a11y") or "",
            prompt_text=u.get("prompt_text") or "",
            prompt_continued=bool(u.get("prompt_continued")),
            response_text=u.get("response_text") or "",
            constraint=u.get("constraint") or "",
            policy_version=int(u.get("policy_version") or 0),
        )
        for u in r["turns"]
    )
    reward = Reward(r["reward"], r["success"], r["reason"], infra_failed=r["infra_failed"])
    return Trajectory(
        r["episode_id"],
        r["task_id"],
        r["platform"],
        turns,
        reward,
        r["infra_failed"],
        r["error"],
        r["policy_version"],
    )


class TrajectoryWriter:
    """Buffers trajectories and writes them as a new part file on every ``flush`` (and on ``close``)."""

    def __init__(self, directory: str | Path, flush_every: int = 64) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.flush_every = flush_every
        self._buffer: list[dict[str, Any]] = []
        # appending to an existing store: after the highest number, not after the count (a gap would make
        # the count collide with an existing part); publish_new skips any number taken meanwhile
        nums = [int(m.group(1)) for p in self.dir.iterdir() if (m := _PART.fullmatch(p.name))]
        self._next = max(nums, default=-1) + 1
        self.written = 0

    def write(self, traj: Trajectory) -> None:
        """Adds one trajectory; flushes when the buffer is full."""
        self._buffer.append(to_row(traj))
        if len(self._buffer) >= self.flush_every:
            self.flush()

    def flush(self) -> Path | None:
        """Writes the buffered trajectories as one part file; returns its path (None when empty)."""
        if not self._buffer:
            return None
        table = pa.Table.from_pylist(self._buffer, schema=SCHEMA)
        path = publish_new(
            self.dir, _part_name, self._next, lambda tmp: pq.write_table(table, tmp, compression="zstd")
        )
        self._next = int(_PART.fullmatch(path.name).group(1)) + 1  # type: ignore[union-attr]
        self.written += len(self._buffer)
        self._buffer = []
        return path

    def close(self) -> None:
        """Flushes what is left."""
        self.flush()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_trajectories(directory: str | Path) -> Iterator[Trajectory]:
    """Every trajectory of a store, part by part, in write order. An unreadable part (truncated, corrupt) is
    skipped with a warning: it is read whole before any of its rows is used, so it is never half-loaded."""
    directory = Path(directory)
    parts = [p for p in directory.iterdir() if _PART.fullmatch(p.name)] if directory.is_dir() else []
    for part in sorted(parts, key=lambda p: int(_PART.fullmatch(p.name).group(1))):  # type: ignore[union-attr]
        try:  # reading with SCHEMA fills the fields an older part lacks with nulls
            rows = pq.read_table(part, schema=SCHEMA).to_pylist()
        except (pa.ArrowException, OSError) as exc:
            _log.warning("skipping unreadable trajectory part %s: %s: %s", part, type(exc).__name__, exc)
            continue
        for row in rows:
            yield from_row(row)


def write_all(directory: str | Path, trajectories: Iterable[Trajectory]) -> int:
    """Writes ``trajectories`` as one part; returns how many."""
    with TrajectoryWriter(directory, flush_every=1 << 30) as w:
        for t in trajectories:
            w.write(t)
    return w.written
