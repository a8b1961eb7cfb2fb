"""The trajectory store: part files appended during a run, a faithful round trip, crash-safe parts."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from maigym_ray.harness.trajectory_store import (
    SCHEMA,
    TURN,
    TrajectoryWriter,
    load_trajectories,
    to_row,
    write_all,
)
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
            a11y='[a] button "A"',
            prompt_text="<system>task</system><user>[a] button</user>",
            response_text='Thought: press A.\nAction: click(id="a")',
            policy_version=i,
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
            a11y='[a] button "A"\n[b] link "<script>x</script>"',
            prompt_text="<user>[b] link</user>",
            prompt_continued=True,
            response_text="oops(",
            policy_version=i + 1,  # a publish landed between the episode's two requests
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


def test_a_gap_in_part_numbers_never_overwrites_a_part(tmp_path) -> None:
    # the repro from the audit: parts 0 and 1 exist, part 0 goes missing; a writer that numbered parts by
    # counting files wrote "part-00001" again and lost the episodes in it
    write_all(tmp_path, [traj(0)])
    write_all(tmp_path, [traj(1)])
    (tmp_path / "part-00000.parquet").unlink()
    write_all(tmp_path, [traj(2)])
    assert sorted(t.episode_id for t in load_trajectories(tmp_path)) == ["ep1", "ep2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00001.parquet", "part-00002.parquet"]


def test_two_writers_on_one_store_never_collide(tmp_path) -> None:
    a, b = TrajectoryWriter(tmp_path, flush_every=1), TrajectoryWriter(tmp_path, flush_every=1)
    for i in range(3):  # both start at part 0: each publish claims the next free number
        a.write(traj(i))
        b.write(traj(10 + i))
    assert len(list(tmp_path.glob("part-*.parquet"))) == 6
    assert len(list(load_trajectories(tmp_path))) == 6
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_truncated_part_is_skipped_with_a_warning(tmp_path, caplog) -> None:
    write_all(tmp_path, [traj(0)])
    write_all(tmp_path, [traj(1), traj(2)])
    part = tmp_path / "part-00001.parquet"
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])  # a crash mid-write, from before
    with caplog.at_level("WARNING"):
        assert [t.episode_id for t in load_trajectories(tmp_path)] == ["ep0"]
    assert "skipping unreadable trajectory part" in caplog.text and "part-00001" in caplog.text
    assert list(load_trajectories(tmp_path / "missing")) == []


def test_a_failed_write_leaves_no_part_behind(tmp_path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    w = TrajectoryWriter(tmp_path, flush_every=10)
    w.write(traj(0))

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", disk_full)
    with pytest.raises(OSError, match="No space"):
        w.flush()
    assert list(tmp_path.iterdir()) == []


def test_a_store_written_before_the_text_columns_still_reads(tmp_path):
    """Parts written before a11y, prompt and response text were kept load with those fields empty."""
    text = {"a11y", "response_text", "prompt_text", "prompt_continued"}
    old_turn = pa.struct([f for f in TURN if f.name not in text])
    old = pa.schema([pa.field("turns", pa.list_(old_turn)) if f.name == "turns" else f for f in SCHEMA])
    row = to_row(traj(0))
    row["turns"] = [{k: v for k, v in u.items() if k not in text} for u in row["turns"]]
    pq.write_table(pa.Table.from_pylist([row], schema=old), tmp_path / "part-00000.parquet")
    (t,) = load_trajectories(tmp_path)
    assert [(u.a11y, u.prompt_text, u.prompt_continued, u.response_text) for u in t.turns] == [
        ("", "", False, "")
    ] * 2
    assert t.turns[0].prompt_ids == (1, 2, 3) and t.turns[1].parse_error == "unknown action"
