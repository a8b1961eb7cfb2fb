"""Crash-safe writes (maigym_ray/durable.py): atomic replace, no-overwrite publish, sealed directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from maigym_ray import durable
from maigym_ray.durable import atomic_path, atomic_write_text, check_sealed, publish_new, seal

pytestmark = pytest.mark.unit


def test_atomic_write_replaces_whole_and_fsyncs_file_and_directory(tmp_path: Path, monkeypatch) -> None:
    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(
        durable.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))
    )
    target = tmp_path / "report.json"
    target.write_text("old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["report.json"]
    assert any(s.endswith(".tmp") for s in synced) and str(tmp_path) in synced  # the file, then the directory


def test_a_crash_mid_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "pool.parquet"
    target.write_text("old, complete")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old, complete" and len(list(tmp_path.iterdir())) == 1


def test_publish_new_never_replaces(tmp_path: Path) -> None:
    name = "n-{:02d}".format
    (tmp_path / name(1)).write_text("taken")
    p0 = publish_new(tmp_path, name, 0, lambda t: t.write_text("a"))
    p1 = publish_new(tmp_path, name, 0, lambda t: t.write_text("b"))
    assert (p0.name, p1.name) == ("n-00", "n-02") and (tmp_path / name(1)).read_text() == "taken"


def test_sealed_directory_detects_truncation_and_missing_files(tmp_path: Path) -> None:
    d = tmp_path / "ckpt"
    (d / "trainer").mkdir(parents=True)
    (d / "trainer" / "weights.pt").write_bytes(b"x" * 1000)
    (d / "state.json").write_text("{}")
    assert "never completed" in str(check_sealed(d))
    seal(d)
    assert check_sealed(d) is None
    (d / "trainer" / "weights.pt").write_bytes(b"x" * 10)
    assert "truncated" in str(check_sealed(d))
    (d / "trainer" / "weights.pt").unlink()
    assert "missing" in str(check_sealed(d))


def test_task_pool_save_is_atomic(tmp_path: Path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    from maigym_ray.tasks.pool import TaskPool

    pool = TaskPool.builtin()
    target = tmp_path / "pool.parquet"
    pool.save(target)
    before = target.read_bytes()

    def crash(table, where, *a, **k):  # half a file, then the process dies
        Path(where).write_bytes(b"PAR1 half")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", crash)
    with pytest.raises(KeyboardInterrupt):
        pool.save(target)
    assert target.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["pool.parquet"]
    monkeypatch.undo()
    assert len(TaskPool.load(target)) == len(pool)


class _Trainer:
    def save(self, path: Path) -> None:
        path.mkdir(parents=True)
        (path / "trainer.pt").write_bytes(b"w" * 4096)


def _checkpoint(run_dir: Path, round_: int) -> Path:
    from types import SimpleNamespace

    from maigym_ray.rl.driver import Driver, RunState

    fake = SimpleNamespace(
        trainer=_Trainer(),
        state=RunState(phase="rl", history=[{"round": i} for i in range(round_)]),
        sampler=SimpleNamespace(state_dict=dict),
        run_dir=run_dir,
        cfg=SimpleNamespace(keep_checkpoints=3),
    )
    Driver._checkpoint(fake)  # type: ignore[arg-type]
    return run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text()


def test_checkpoints_are_sealed_and_a_truncated_one_is_skipped_on_resume(tmp_path: Path, caplog) -> None:
    import time

    from maigym_ray.rl.driver import sealed_checkpoint

    first = _checkpoint(tmp_path, 1)
    time.sleep(0.01)
    second = _checkpoint(tmp_path, 2)
    root = tmp_path / "checkpoints"
    assert check_sealed(first) is None and check_sealed(second) is None
    assert sealed_checkpoint(root) == second
    (second / "trainer" / "trainer.pt").write_bytes(b"w" * 100)  # the disk lost the tail of the newest
    with caplog.at_level("WARNING"):
        assert sealed_checkpoint(root) == first  # the older whole one, never the truncated one
    assert "skipping checkpoint" in caplog.text and "truncated" in caplog.text
    (first / durable.MANIFEST).unlink()  # one that was never completed
    assert sealed_checkpoint(root) is None
