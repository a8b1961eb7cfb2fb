"""The learning benchmark's per-task MiniWoB++ figures (benchmarks/learning.py), read from a run's stored evals.

No training runs: a run directory is faked with the trajectory store the driver writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from maigym_ray.harness.trajectory_store import write_all
from maigym_ray.types import Reward, Trajectory

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def learning(load_file):
    return load_file("benchmarks/learning.py")


def _traj(i: int, task: str, won: bool, infra: bool = False) -> Trajectory:
    return Trajectory(f"e{i}", task, "web", (), Reward(float(won), won), infra_failed=infra)


def test_per_task_success_comes_from_each_stored_eval(learning, tmp_path: Path) -> None:
    evals = tmp_path / "trajectories"
    write_all(
        evals / "eval-before",
        [_traj(0, "miniwob.click-tab.16", False), _traj(1, "miniwob.enter-text.17", False)],
    )
    write_all(
        evals / "eval-sft",
        [
            _traj(0, "miniwob.click-tab.16", True),
            _traj(1, "miniwob.click-tab.17", False),
            _traj(2, "miniwob.enter-text.16", True),
            _traj(3, "miniwob.enter-text.17", False, infra=True),  # unscored: not a failure
        ],
    )
    write_all(
        evals / "eval-rl", [_traj(0, "miniwob.click-tab.16", True), _traj(1, "miniwob.click-tab.17", True)]
    )
    got = learning.per_task(tmp_path)
    assert got["click-tab"] == {"before": 0.0, "sft": 0.5, "rl": 1.0}
    # enter-text: no RL episode at all, so no RL figure (not a 0)
    assert got["enter-text"] == {"before": 0.0, "sft": 1.0}


def test_published_figures_cover_every_task_of_the_miniwob_experiment(learning) -> None:
    import yaml

    pool = yaml.safe_load((learning.ROOT / "conf" / "experiment" / "miniwob_smol.yaml").read_text())["tasks"][
        "pool"
    ]
    names = pool.split(":", 1)[1].split("@")[0].split(",")
    for model, figures in learning.PUBLISHED.items():
        assert set(figures) == set(names), model
        assert all(0.0 <= v <= 1.0 for v in figures.values()), model
