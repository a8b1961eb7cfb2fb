"""Crash-safe writes: a file or a directory is either all there (and on disk) or not there at all.

- :func:`atomic_path` / :func:`atomic_write_text`: write to a temporary file in the same directory, fsync it,
  rename it over the target, fsync the directory. A crash leaves the old file or the new one, never half of
  one (``write_text`` in place leaves a truncated file; a rename without fsync can leave an empty one).
- :func:`publish_new`: the same, but never replaces: it claims the first free name of a numbered series
  (``part-00007.parquet``) with ``link``, which fails if the name exists, so two writers, or a writer after a
  gap in the series, never overwrite each other.
- :func:`seal` / :func:`check_sealed`: a directory written file by file (a checkpoint) gets a manifest of its
  files and sizes, written last and atomically once everything else is fsynced. A directory without a
  manifest, or whose files do not match it, is incomplete: readers skip it with a warning.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

#: The manifest file of a sealed directory.
MANIFEST = "MANIFEST.json"


def fsync_dir(path: str | Path) -> None:
    """Makes a directory's entries (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | Path) -> None:
    """Makes a file's contents durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tmp_name(path: Path) -> Path:
    # hidden and uniquely named: no glob of the real files matches it, and concurrent writers never share one
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yields a temporary path next to ``path``; when the block succeeds, the file written there replaces
    ``path`` durably. When it raises, the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    tmp = _tmp_name(path)
    try:
        yield tmp
        fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Writes ``text`` to ``path`` crash-safely (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` crash-safely (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def publish_new(
    directory: str | Path, name_of: Callable[[int], str], first: int, write: Callable[[Path], None]
) -> Path:
    """Writes a new file with ``write(tmp)`` and publishes it as ``name_of(n)`` for the first ``n >= first``
    whose name is free, never replacing an existing file. Returns the published path."""
    directory = Path(directory)
    tmp = _tmp_name(directory / name_of(first))
    try:
        write(tmp)
        fsync_file(tmp)
        n = first
        while True:
            target = directory / name_of(n)
            try:
                os.link(tmp, target)  # atomic, and fails if the name is taken: no overwrite, ever
                break
            except FileExistsError:
                n += 1
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(directory)
    return target


def seal(directory: str | Path) -> None:
    """Fsyncs every file under ``directory`` and then writes its manifest (relative path -> size) atomically.
    Call it after the directory is completely written; :func:`check_sealed` then vouches for it."""
    directory = Path(directory)
    files: dict[str, int] = {}
    for root, dirs, names in os.walk(directory):
        for name in names:
            p = Path(root) / name
            if p.parent == directory and name == MANIFEST:
                continue
            fsync_file(p)
            files[p.relative_to(directory).as_posix()] = p.stat().st_size
        for d in dirs:
            fsync_dir(Path(root) / d)
    fsync_dir(directory)
    atomic_write_text(directory / MANIFEST, json.dumps({"files": files}, sort_keys=True))


def check_sealed(directory: str | Path) -> str | None:
    """None if ``directory`` is sealed and every file matches its manifest; otherwise why not."""
    directory = Path(directory)
    try:
        files = json.loads((directory / MANIFEST).read_text())["files"]
    except FileNotFoundError:
        return f"{directory} has no {MANIFEST} (it was never completed)"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{directory}/{MANIFEST} is unreadable ({type(exc).__name__})"
    for rel, size in files.items():
        try:
            got = (directory / rel).stat().st_size
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return f"{directory}/{rel} is missing"
            raise
        if got != size:
            return f"{directory}/{rel} has {got} bytes, the manifest says {size} (truncated)"
    return None
