"""Failure clusters by (app, screen, action), the split of each cluster's tasks, and the two arms' draws
(synth/targeting.py); the checkpoint fork the diagnosis loop continues from (runtime/diagnosis_loop.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from maigym_ray.apps.registry import APP_CLASSES
from maigym_ray.durable import check_sealed, seal
from maigym_ray.errors import ConfigError
from maigym_ray.rl.driver import sealed_checkpoint
from maigym_ray.runtime.diagnosis_loop import DiagnosisLoopConfig, candidate_tasks, fork_checkpoint
from maigym_ray.synth.spec_tasks import single_action_tasks
from maigym_ray.synth.targeting import (
    cluster_of,
    cluster_outcomes,
    draw_random,
    draw_targeted,
    partition,
    success_on,
    weakest_clusters,
    went_wrong_at,
)
from maigym_ray.tasks.pool import task_from_dict
from maigym_ray.types import TaskSpec

pytestmark = pytest.mark.unit


def _photos() -> list[TaskSpec]:
    cls = APP_CLASSES["photos"]
    return [task_from_dict(r) for r in single_action_tasks(cls.SPEC, cls().state(), 20)]


def test_a_spec_tasks_cluster_is_its_app_the_screen_its_golden_opens_and_its_action() -> None:
    tasks = {t.id: t for t in _photos()}
    fav = tasks["spec-photos-favorite-photo-ph1"]
    assert fav.golden[0] == 'click(id="nav-library")'
    assert cluster_of(fav) == ("photos", "library", "toggle")
    created = [t for t in tasks.values() if "action:create" in t.tags]
    assert created and all(cluster_of(t)[1:] == ("?", "create") for t in created)  # from the home screen


def test_a_failure_is_placed_where_it_first_left_the_golden_path() -> None:
    task = {t.id: t for t in _photos()}["spec-photos-favorite-photo-ph1"]
    nav, rec, act = task.golden
    assert went_wrong_at(task, []) == "navigate"
    assert went_wrong_at(task, ['click(id="nav-albums")', rec, act]) == "navigate"
    assert went_wrong_at(task, [nav, 'click(id="photos-ph7")']) == "record"  # the twin title, wrong record
    assert went_wrong_at(task, [nav, "I would click the photo", act]) == "record"  # prose never matches
    assert went_wrong_at(task, [nav, rec, 'click(id="delete-photo")']) == "action"
    assert went_wrong_at(task, ['click( id = "nav-library" )', rec]) == "action"  # compared as parsed
    assert went_wrong_at(task, [nav, rec, act, 'click(id="home")']) == "finish"


def test_outcomes_leave_out_infra_failures_and_unknown_tasks() -> None:
    a, b = _photos()[:2]
    rows = [
        {"task_id": a.id, "success": True},
        {"task_id": a.id, "success": False},
        {"task_id": a.id, "success": False, "infra_failed": True},  # no verdict on the policy
        {"task_id": "not-in-the-pool", "success": False},
    ]
    out = cluster_outcomes(rows, {a.id: a, b.id: b})
    assert list(out) == [cluster_of(a)]
    assert (out[cluster_of(a)].episodes, out[cluster_of(a)].successes) == (2, 1)
    assert success_on(out, [cluster_of(a)]) == 0.5
    assert success_on(out, [("photos", "nowhere", "toggle")]) is None


def test_the_weakest_clusters_have_a_failure_and_reservoir_tasks_left() -> None:
    t = _photos()
    by = {cluster_of(x): x for x in t}
    keys = sorted(by)
    rows = [{"task_id": by[keys[0]].id, "success": True}]  # solved: never targeted
    rows += [{"task_id": by[keys[1]].id, "success": s} for s in (True, False)]  # 0.5
    rows += [{"task_id": by[keys[2]].id, "success": False}]  # 0.0
    rows += [{"task_id": by[keys[3]].id, "success": False}]  # 0.0, but nothing left to draw
    out = cluster_outcomes(rows, {x.id: x for x in t})
    assert weakest_clusters(out, 2) == sorted([keys[2], keys[3]])
    left = {keys[1]: 3, keys[2]: 3, keys[3]: 0}
    assert weakest_clusters(out, 2, left) == [keys[2], keys[1]]
    assert weakest_clusters(out, 5, left) == [keys[2], keys[1]]
    # equal success: the cluster whose episodes got less far along their golden paths is the weaker
    far, near = by[keys[2]], by[keys[3]]
    rows = [
        {"task_id": far.id, "success": False, "actions": list(far.golden[:2])},  # right screen and record
        {"task_id": near.id, "success": False, "actions": ['click(id="home")']},  # lost from the first step
    ]
    out = cluster_outcomes(rows, {x.id: x for x in t})
    assert out[keys[2]].mean_progress == 2 / len(far.golden) and out[keys[3]].mean_progress == 0.0
    assert weakest_clusters(out, 2) == [keys[3], keys[2]]


def test_partition_gives_every_cluster_disjoint_held_out_base_and_reservoir_tasks() -> None:
    tasks = _photos()
    part = partition(tasks, heldout_per=2, base_per=1, min_reservoir=4, seed=0)
    sizes = {}
    for t in tasks:
        sizes[cluster_of(t)] = sizes.get(cluster_of(t), 0) + 1
    assert part.clusters == sorted(k for k, n in sizes.items() if n >= 7)  # the small ones left out whole
    held = {t.id for t in part.heldout}
    base = {t.id for t in part.base}
    res = {t.id for ts in part.reservoir.values() for t in ts}
    assert len(held) == 2 * len(part.clusters) and len(base) == len(part.clusters)
    assert not (held & base) and not (held & res) and not (base & res)
    assert {t.split for t in part.heldout} == {"test"} and {t.split for t in part.base} == {"train"}
    again = partition(list(reversed(tasks)), 2, 1, 4, seed=0)  # a function of the seed, not the order
    assert [t.id for t in again.heldout] == [t.id for t in part.heldout]
    other = partition(tasks, 2, 1, 4, seed=1)
    assert [t.id for t in other.heldout] != [t.id for t in part.heldout]
    with pytest.raises(ConfigError, match="heldout_per"):
        partition(tasks, 0, 1, 4, seed=0)


def test_targeted_draws_take_turns_over_the_weakest_and_random_draws_span_every_cluster() -> None:
    part = partition(_photos(), 2, 1, 4, seed=0)
    res = {k: list(v) for k, v in part.reservoir.items()}
    total = sum(len(v) for v in res.values())
    aimed = part.clusters[:2]
    got = draw_targeted(res, aimed, 5)
    assert [cluster_of(t) for t in got] == [aimed[0], aimed[1], aimed[0], aimed[1], aimed[0]]
    assert sum(len(v) for v in res.values()) == total - 5 and not {t.id for t in got} & {
        t.id for v in res.values() for t in v
    }
    # the aimed clusters run out: fewer tasks, never another cluster's
    rest = draw_targeted(res, aimed, 100)
    assert {cluster_of(t) for t in rest} <= set(aimed) and not res[aimed[0]] and not res[aimed[1]]
    rng = random.Random(0)
    drawn = draw_random(res, 6, rng)
    assert len(drawn) == 6 and len({t.id for t in drawn}) == 6
    assert not {t.id for t in drawn} & {t.id for v in res.values() for t in v}
    big = {k: list(v) for k, v in part.reservoir.items()}
    spread = {cluster_of(t) for _ in range(5) for t in draw_random(big, 4, rng)}
    assert len(spread) > 2  # uniform over the tasks of every cluster, not one cluster's


def test_the_loop_config_rejects_apps_that_are_not_spec_apps_and_empty_rounds() -> None:
    with pytest.raises(ConfigError, match="mail"):
        DiagnosisLoopConfig(apps=["mail"])
    with pytest.raises(ConfigError, match="rounds"):
        DiagnosisLoopConfig(rounds=0)
    default = DiagnosisLoopConfig()
    assert "photos" in default.app_list() and "podcasts" not in default.app_list()  # a novel app
    assert {t.start_app for t in candidate_tasks(DiagnosisLoopConfig(apps=["news"]))} == {"news"}


def _checkpoint(run: Path, name: str, phase: str, version: int) -> Path:
    ckpt = run / "checkpoints" / name
    (ckpt / "trainer").mkdir(parents=True)
    (ckpt / "trainer" / "trainer.pt").write_bytes(b"w" * 64)
    (ckpt / "state.json").write_text(
        json.dumps({"phase": phase, "round": 3, "version": version, "heldout": {"sft": 0.5}, "history": [{}]})
    )
    seal(ckpt)
    (run / "checkpoints" / "latest").write_text(name)
    return ckpt


def test_a_fork_continues_from_the_latest_weights_at_phase_before_and_leaves_the_source_whole(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    old = _checkpoint(src, "ckpt-00003-aaaaaa", "done", 7)
    fork_checkpoint(src, tmp_path / "dst")
    got = sealed_checkpoint(tmp_path / "dst" / "checkpoints")
    assert got is not None and got.name == old.name and check_sealed(got) is None
    state = json.loads((got / "state.json").read_text())
    assert (state["phase"], state["round"], state["version"], state["history"]) == ("before", 0, 7, [])
    assert (got / "trainer" / "trainer.pt").stat().st_ino == (old / "trainer" / "trainer.pt").stat().st_ino
    assert check_sealed(old) is None and json.loads((old / "state.json").read_text())["phase"] == "done"
    with pytest.raises(FileNotFoundError, match="no sealed checkpoint"):
        fork_checkpoint(tmp_path / "empty", tmp_path / "dst2")
