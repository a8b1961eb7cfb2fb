"""The trajectory store: part files appended during a run, a faithful round trip, crash-safe parts."""

from __future__ import annotations

import pytest

from maigym_ray.harness.trajectory_store import SCHEMA, TrajectoryWriter, load_trajectories, write_all
from maigym_ray.types import Action, Reward, Trajectory, Turn

pytestmark = pytest.mark.unit


def traj(i: int, infra: bool = False) -> Trajectory:
    turns = (
        Turn(
            0,
            'click(id="a")',
            Action("click", {"id": "a"}),
            "",
            (1, 2, 3),
            (4, 5),
            (-0.5, -0.25),
            b"png",
            {"policy_s": 0.1, "env_s": 0.2, "cached_tokens": 32.0},
        ),
        Turn(
            1,
            "oops(",
            None,
            "unknown action",
            (1, 2, 3, 4, 5, 6),
            (7,),
            (-1.0,),
            b"",
            {"policy_s": 0.0, "env_s": 0.1, "cached_tokens": 0.0},
        ),
    )
    reward = Reward(0.0, False, "infrastructure failure", True) if infra else Reward(1.0, True, "ok")
    return Trajectory(
        f"ep{i}",
        f"task{i % 3}",
        "web",
        turns,
        reward,
        infra,
        "EnvUnavailableError: x" if infra else "",
        policy_version=i,
    )


def test_round_trip_is_exact(tmp_path):
    trajs = [traj(i, infra=i == 2) for i in range(5)]
    assert write_all(tmp_path, trajs) == 5
    assert list(load_trajectories(tmp_path)) == trajs


def test_appends_part_files_while_running_and_resumes_numbering(tmp_path):
    w = TrajectoryWriter(tmp_path, flush_every=2)
    for i in range(5):
        w.write(traj(i))
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == ["part-00000.parquet", "part-00001.parquet"]
    assert [t.episode_id for t in load_trajectories(tmp_path)] == [
        "ep0",
        "ep1",
        "ep2",
        "ep3",
    ]  # flushed so far
    w.close()
    assert w.written == 5 and not list(tmp_path.glob("*.tmp"))
    with TrajectoryWriter(tmp_path) as w2:  # a resumed run appends after the existing parts
        w2.write(traj(9))
    assert [t.episode_id for t in load_trajectories(tmp_path)][-1] == "ep9"
    assert (tmp_path / "part-00003.parquet").exists()


def test_schema_is_documented_and_stable():
    assert SCHEMA.names[:3] == ["episode_id", "task_id", "platform"]
    turn_fields = [f.name for f in SCHEMA.field("turns").type.value_type]
    assert {"prompt_ids", "response_ids", "logprobs", "parse_error", "screenshot"} <= set(turn_fields)
