"""Fault drills on what a run writes: a full disk under the trajectory store, a corrupted Parquet part, and
the trainer killed (SIGKILL, mid-checkpoint) then resumed from its last checkpoint."""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from maigym_ray.harness import trajectory_store
from maigym_ray.harness.trajectory_store import TrajectoryWriter, load_trajectories
from maigym_ray.types import Reward, Trajectory

pytestmark = pytest.mark.faults


def traj(i: int) -> Trajectory:
    return Trajectory(f"ep{i}", f"t{i}", "web", (), Reward(float(i % 2), bool(i % 2), "r"))


def test_a_full_disk_is_reported_and_loses_nothing_written(tmp_path, monkeypatch):
    store = tmp_path / "trajectories"
    w = TrajectoryWriter(store, flush_every=2)
    for i in range(4):
        w.write(traj(i))  # two parts on disk
    real = trajectory_store.pq.write_table

    def full_disk(table, where, *a, **kw):  # half a file lands, then the device is full
        real(table, where, *a, **kw)
        with open(where, "r+b") as f:
            f.truncate(os.path.getsize(where) // 2)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(where))

    monkeypatch.setattr(trajectory_store.pq, "write_table", full_disk)
    w.write(traj(4))
    with pytest.raises(OSError) as info:  # reported, as the OS said it
        w.write(traj(5))
    assert info.value.errno == errno.ENOSPC
    assert [t.episode_id for t in load_trajectories(store)] == ["ep0", "ep1", "ep2", "ep3"]  # intact
    monkeypatch.setattr(trajectory_store.pq, "write_table", real)
    w.close()  # space again: the buffered episodes are still there and land now
    assert [t.episode_id for t in load_trajectories(store)] == [f"ep{i}" for i in range(6)]


def test_a_corrupted_part_is_skipped_with_a_warning(tmp_path, caplog):
    store = tmp_path / "trajectories"
    with TrajectoryWriter(store, flush_every=2) as w:
        for i in range(6):
            w.write(traj(i))
    parts = sorted(store.glob("part-*.parquet"))
    assert len(parts) == 3
    parts[1].write_bytes(parts[1].read_bytes()[:40])  # truncated mid-write
    with caplog.at_level(logging.WARNING):
        ids = [t.episode_id for t in load_trajectories(store)]
    assert ids == ["ep0", "ep1", "ep4", "ep5"]
    assert any(parts[1].name in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


_CHECKPOINTER = textwrap.dedent(
    """
    import sys, torch
    import maigym_ray
    from maigym_ray.rl.driver import Driver
    from maigym_ray.rl.driver_config import DriverConfig, JobConfig, TaskSplit
    from maigym_ray.rl.trainer import TorchTrainer
    from maigym_ray.testing import fake_task

    def driver(run_dir):
        job = JobConfig(driver=DriverConfig(keep_checkpoints=2), run_dir=run_dir, wandb_mode="disabled")
        d = Driver(job, TaskSplit(train=[fake_task("t0")], heldout=[]))
        d.trainer = TorchTrainer(torch.nn.Linear(64, 64))
        return d

    if __name__ == "__main__":
        d = driver(sys.argv[1])
        for r in range(1, 100000):  # each round: the weights and the state say r
            with torch.no_grad():
                d.trainer.model.bias.fill_(float(r))
            d.state.round = r
            d.state.history.append({"round": r})
            d._checkpoint()
            print(r, flush=True)
    """
)


def test_the_trainer_killed_mid_checkpoint_resumes_from_a_whole_checkpoint(tmp_path):
    script = tmp_path / "checkpointer.py"
    script.write_text(_CHECKPOINTER)
    run = tmp_path / "run"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(
        [sys.executable, str(script), str(run)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while int(proc.stdout.readline() or 0) < 5:  # a few checkpoints, then kill inside the next one
            assert time.monotonic() < deadline and proc.poll() is None, "the checkpointer did not start"
        time.sleep(0.013)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    sys.path.insert(0, str(tmp_path))
    try:
        import checkpointer  # the same Driver set-up, in this process
    finally:
        sys.path.pop(0)
    resumed = checkpointer.driver(str(run))
    assert resumed._load_checkpoint()
    r = resumed.state.round
    assert r >= 5 and len(resumed.state.history) == r  # state and weights come from the same checkpoint
    assert float(resumed.trainer.model.bias[0].detach()) == float(r)
    assert len(list((run / "checkpoints").glob("ckpt-*"))) <= 3  # old ones pruned; at most one half-written
