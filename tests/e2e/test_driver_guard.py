"""The learning guard's harness on the training job's own loop (maigym_ray/testing/driver_guard.py): the real
driver over live roles (Ray, fake-backend envs, a vLLM engine on the tiny model, the trainer group) runs every
phase, and its broken arms resume the healthy run's post-SFT checkpoint and break what they say they break.

These check the harness's mechanics at the smallest size (two rounds). Whether the real loop lifts held-out
success on ``fake-pick`` within a CI budget is a measurement, not yet met (docs/experiments/
2026-12-04-driver-guard.md); tests/e2e/test_learning.py remains the CI guard that RL helps.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from maigym_ray.testing.driver_guard import DriverGuard, GuardFamily, fork_after_sft, guard_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def guard(tmp_path_factory):
    # 60 SFT steps: after fewer the tiny model solves almost nothing, and groups with equal rewards train nothing
    cfg = guard_config(driver={"sft": {"steps": 60}, "grpo": {"rounds": 2}})
    g = DriverGuard(tmp_path_factory.mktemp("guard"), cfg, GuardFamily(train=64, heldout=16))
    g.start()
    try:
        g.report = g.healthy()
        yield g
    finally:
        g.stop()


def _versions(run: Path) -> dict[str, set[int]]:
    """The policy versions that sampled each RL round's episodes."""
    out: dict[str, set[int]] = {}
    for p in sorted((run / "trajectories" / "rl").rglob("*.parquet")):
        rows = pq.read_table(p, columns=["policy_version"]).to_pylist()
        out.setdefault(p.parent.name, set()).update(int(r["policy_version"]) for r in rows)
    return out


def _weights(ckpt: Path) -> dict[str, torch.Tensor]:
    """The trainer's weights in checkpoint ``ckpt``."""
    return torch.load(ckpt / "trainer" / "trainer.pt", map_location="cpu", weights_only=True)["model"]


def _latest(run: Path) -> Path:
    root = run / "checkpoints"
    return root / (root / "latest").read_text().strip()


def test_the_real_driver_runs_every_phase_over_live_roles(guard) -> None:
    r = guard.report
    assert r["rounds"] == 2
    assert all(h["infra_failed"] == 0 for h in r["history"]), r["history"]
    for key in ("heldout_success_before", "heldout_success_sft", "heldout_success_rl"):
        assert 0.0 <= r[key] <= 1.0
    # round 0 is sampled by the weights SFT broadcast (version 1), never by the base model
    assert _versions(guard.root / "healthy")["round-0000"] == {1}


def test_a_zero_learning_rate_arm_resumes_the_sft_weights_and_keeps_them(guard) -> None:
    r = guard.rerun_rl("zero-lr", trainer={"lr": 0.0})
    assert r["heldout_success_sft"] == guard.report["heldout_success_sft"]  # the post-SFT state, resumed
    assert r["rounds"] == 2
    sft = _weights(fork_after_sft(guard.root / "healthy", guard.root / "sft-copy"))
    after = _weights(_latest(guard.root / "zero-lr"))
    assert sft.keys() == after.keys()
    assert all(torch.equal(sft[k], after[k]) for k in sft)


def test_a_sync_that_never_arrives_leaves_the_engine_on_the_resumed_weights(guard, monkeypatch) -> None:
    from maigym_ray.rl.driver import Driver

    real = Driver._broadcast
    calls: list[int] = []

    async def lost(self) -> float:  # the resume's broadcast lands; every later one is dropped
        calls.append(self.state.version)
        if len(calls) == 1:
            return await real(self)
        self.state.version += 1
        return 0.0

    monkeypatch.setattr(Driver, "_broadcast", lost)
    r = guard.rerun_rl("sync-never-arrives")
    assert len(calls) >= 2  # at least one round trained and its broadcast was due
    assert r["policy_version"] > 1
    # the engine reports the version it serves in every generation: still the resumed one
    assert set().union(*_versions(guard.root / "sync-never-arrives").values()) == {1}
