"""Unit tests for the multi-step, find-and-answer and cross-app tasks derived from app specs
(maigym_ray/synth/spec_multi.py, spec_answer.py, spec_cross_app.py, spec_suite.py).

Each derived task is replayed in process on :class:`~maigym_ray.synth.screens.Screens` (the same element ids a
browser clicks): the verifier fails on the task's initial state and passes after the golden solution. Live
validation on Chromium is benchmarks/synthesis.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from maigym_ray.actions import parse_action
from maigym_ray.apps.registry import APP_CLASSES, NOVEL_APPS, SPEC_APPS
from maigym_ray.errors import ConfigError
from maigym_ray.synth.screens import Screens
from maigym_ray.synth.spec_answer import answer_tasks, count_tasks
from maigym_ray.synth.spec_cross_app import cross_app_tasks
from maigym_ray.synth.spec_multi import chain_tasks, create_then_tasks, search_tasks
from maigym_ray.synth.spec_suite import (
    FULL,
    QUICK,
    SpecTaskSizes,
    derive_spec_tasks,
    derive_with_cross_share,
    kind_of,
)
from maigym_ray.tasks.pool import task_from_dict
from maigym_ray.tasks.verifiers import run_verifier

pytestmark = pytest.mark.unit


def play(task: dict[str, Any], golden: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(initial state, final state, answer) after replaying ``golden`` (default: the task's) in process."""
    s = Screens(task.get("initial_state", {}), task["apps"])
    s.open_app(task["start_app"])
    before = s.state()
    answer = None
    for text in task["golden"] if golden is None else golden:
        a = parse_action(text)
        if a.name == "click":
            s.click(a.args["id"])
        elif a.name == "type":
            s.type(a.args["id"], a.args["text"])
        elif a.name == "open_app":
            s.open_app(a.args["name"])
        elif a.name == "answer":
            answer = a.args["text"]
        else:
            raise AssertionError(f"unexpected golden action {text}")
    return before, s.state(), answer


def assert_valid(task: dict[str, Any]) -> None:
    task_from_dict(task, task["id"])  # the task-file check a pool applies
    before, after, answer = play(task)
    assert not run_verifier(task["verifier"], before, None).success, f"{task['id']} passes initially"
    got = run_verifier(task["verifier"], after, answer)
    assert got.success, f"{task['id']}: golden misses the goal: {got.reason}"


def _spec(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return APP_CLASSES[name].SPEC, APP_CLASSES[name]().state()


@pytest.mark.parametrize("name", SPEC_APPS)
def test_every_single_app_kind_fails_initially_and_its_golden_reaches_the_goal(name: str) -> None:
    tasks = derive_spec_tasks([name], QUICK)
    kinds = {kind_of(t) for t in tasks}
    assert {"spec_single_action", "spec_chain", "spec_answer", "spec_count"} <= kinds, kinds
    for t in tasks:
        assert t["apps"] == [name]
        assert_valid(t)


def test_a_chain_acts_on_distinct_records_and_half_of_it_scores_zero() -> None:
    spec, state = _spec("board")
    chains = chain_tasks(spec, state, limit=5, length=3)
    assert len(chains) == 5
    for t in chains:
        checks = t["verifier"]["params"]["checks"]
        ids = [(c["path"], c["match"].get("id")) for c in checks if "id" in c["match"]]
        assert len(ids) == len(set(ids)), "chained actions must not touch a common record"
        assert_valid(t)
        # the golden up to the second navigation does only the first action: not enough
        navs = [i for i, a in enumerate(t["golden"]) if a.startswith('click(id="nav-')]
        _, partial, _ = play(t, t["golden"][: navs[1]])
        assert not run_verifier(t["verifier"], partial, None).success, t["id"]


def test_search_tasks_find_the_record_through_the_search_box() -> None:
    spec, state = _spec("recipes")
    tasks = search_tasks(spec, state, limit=4)
    assert tasks
    for t in tasks:
        assert 'click(id="search")' in t["golden"] and t["golden"][1].startswith('type(id="search-box"')
        assert_valid(t)


def test_create_then_act_changes_the_new_record() -> None:
    spec, state = _spec("phonebook")
    tasks = create_then_tasks(spec, state, limit=3)
    assert tasks
    for t in tasks:
        new_id = t["verifier"]["params"]["checks"][0]["match"]["id"]
        assert new_id not in {r["id"] for r in state["contacts"]}
        assert_valid(t)


def test_answers_come_from_the_state_and_a_wrong_answer_fails() -> None:
    spec, state = _spec("auction")
    tasks = answer_tasks(spec, state, limit=50, variants=2)
    variants = [t for t in tasks if "seed_variant" in t["tags"]]
    assert variants and len(tasks) > len(variants)
    by_id = {t["id"]: t for t in tasks}
    for t in tasks:
        assert_valid(t)
        _, after, _ = play(t)
        assert not run_verifier(t["verifier"], after, "certainly not this").success
    for v in variants:
        base = by_id[v["id"].rsplit("-v", 1)[0]]
        # a seed variant asks the same question on a state where the answer differs
        assert v["instruction"] == base["instruction"]
        assert v["verifier"] != base["verifier"]
        _, after, _ = play(v)
        assert not run_verifier(v["verifier"], after, play(base)[2]).success, v["id"]


def test_count_questions_count_what_the_filter_lets_through() -> None:
    spec, state = _spec("auction")
    tasks = {t["id"]: t for t in count_tasks(spec, state)}
    watch = tasks["spec-auction-count-watchlist"]["verifier"]["params"]["checks"][0]
    assert watch["any_of"] == [str(sum(r["watching"] for r in state["lots"]))]


def test_cross_app_tasks_read_in_one_app_and_write_in_another() -> None:
    names = ["auction", "phonebook", "recipes", "helpdesk"]
    specs = [APP_CLASSES[n].SPEC for n in names]
    states = {n: APP_CLASSES[n]().state() for n in names}
    tasks = cross_app_tasks(specs, states, limit=24, rng_seed=3)
    assert len(tasks) == 24
    assert len({tuple(t["apps"]) for t in tasks}) >= 6  # spread over the pairs of apps
    for t in tasks:
        src, dst = t["apps"]
        assert src != dst and t["start_app"] == src
        assert f'open_app(name="{dst}")' in t["golden"]
        assert all(c["app"] == dst for c in t["verifier"]["params"]["checks"])
        assert_valid(t)
        # typing anything but the value read in the first app misses the goal
        wrong = [
            f'type(id="{parse_action(a).args["id"]}", text="nope")' if a.startswith("type(") else a
            for a in t["golden"]
        ]
        _, after, _ = play(t, wrong)
        assert not run_verifier(t["verifier"], after, None).success, t["id"]
    assert cross_app_tasks(specs, states, limit=24, rng_seed=3) == tasks  # deterministic in the seed


def test_the_full_sizes_give_over_5000_distinct_candidates_with_a_third_cross_app() -> None:
    tasks = derive_with_cross_share(SPEC_APPS, FULL, 0.5)
    assert len(tasks) >= 5000
    assert len({t["id"] for t in tasks}) == len(tasks)
    assert len({a for t in tasks for a in t["apps"]}) == len(SPEC_APPS)
    assert sum(len(t["apps"]) == 2 for t in tasks) / len(tasks) >= 0.3
    for t in tasks:
        assert t["split"] == ("ood_app" if set(t["apps"]) & set(NOVEL_APPS) else "train"), t["id"]


def test_sizes_are_checked() -> None:
    with pytest.raises(ConfigError, match="chains2"):
        replace(QUICK, chains2=-1)
    with pytest.raises(ConfigError, match="not a spec app"):
        derive_spec_tasks(["mail"], SpecTaskSizes())


def test_cross_app_tasks_over_every_spec_app_write_through_updates_bookings_and_new_records() -> None:
    specs = [APP_CLASSES[n].SPEC for n in SPEC_APPS]
    states = {n: APP_CLASSES[n]().state() for n in SPEC_APPS}
    tasks = cross_app_tasks(specs, states, limit=300, rng_seed=1)
    kinds = {next(x for x in t["tags"] if x.startswith("action:")) for t in tasks}
    assert kinds == {"action:update", "action:book", "action:create"}
    assert len({a for t in tasks for a in t["apps"]}) == len(SPEC_APPS)
    for t in tasks:
        assert_valid(t)
