"""Task families: an instance seed gives a new task; train and held-out instances never share a seed or content."""

from __future__ import annotations

import copy

import pytest

from maigym_ray.actions import parse_action
from maigym_ray.apps.registry import APP_CLASSES, NOVEL_APPS
from maigym_ray.errors import ConfigError, TaskError
from maigym_ray.runtime.pools import load_tasks
from maigym_ray.runtime.schema import TasksConfig
from maigym_ray.tasks.families import (
    FAMILIES,
    family_names,
    family_tasks,
    heldout_seeds,
    train_seeds,
)
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.tasks.verifiers import run_verifier

pytestmark = pytest.mark.unit


def _content(t):
    return (t.instruction, repr(t.initial_state))


def test_train_and_heldout_seeds_are_disjoint_and_so_is_their_content() -> None:
    assert not set(train_seeds(100_000)) & set(heldout_seeds(1000))
    tasks = family_tasks(FAMILIES, 300, 50)
    TaskPool(tasks)  # unique ids
    train = {_content(t) for t in tasks if t.split == "train"}
    test = [t for t in tasks if t.split == "test"]
    assert len(test) == 50 * len(FAMILIES) and not {_content(t) for t in test} & train


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_instances_change_names_ids_order_and_target(name: str) -> None:
    fam = FAMILIES[name]
    a, b = fam.instance(1), fam.instance(2)
    assert fam.instance(1) == a  # deterministic
    items = [t.initial_state[fam.app][fam.items] for t in (a, b)]
    assert [r["id"] for r in items[0]] != [r["id"] for r in items[1]]
    targets = {fam.instance(s).golden[0] for s in range(40)}
    instructions = {fam.instance(s).instruction for s in range(40)}
    assert len(targets) > 20 and len(instructions) > 8  # the answer is on the screen, not in a lookup


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_golden_effect_passes_the_verifier_and_nothing_else_does(name: str) -> None:
    fam = FAMILIES[name]
    for seed in range(20):
        t = fam.instance(seed)
        assert t.apps == (fam.app,) and fam.app in APP_CLASSES
        assert all(parse_action(g) for g in t.golden) and len(t.golden) < t.max_steps
        APP_CLASSES[fam.app]().validated(t.initial_state[fam.app])  # the app accepts the seed
        target = t.golden[0].split('"')[1].removeprefix(f"{fam.element}-")
        state = copy.deepcopy(t.initial_state)
        assert not run_verifier(t.verifier, state, None).success
        wrong = copy.deepcopy(state)
        other = next(r for r in wrong[fam.app][fam.items] if r["id"] != target)
        other.update(fam.match)
        assert not run_verifier(t.verifier, wrong, None).success
        rec = next(r for r in state[fam.app][fam.items] if r["id"] == target)
        rec.update(fam.match)
        assert run_verifier(t.verifier, state, None).success
        assert f"“{rec.get('subject') or rec.get('name') or rec.get('title')}”" in t.instruction


def test_the_pool_spec_loads_families_and_the_novel_split() -> None:
    pool = load_tasks(
        TasksConfig(pool="families:mail-star,contacts-favorite", family_train=5, family_heldout=3)
    )
    assert sum(t.split == "train" for t in pool) == 10 and sum(t.split == "test" for t in pool) == 6
    novel = load_tasks(
        TasksConfig(
            pool="families:mail-star", family_train=4, family_heldout=2, novel_families=["plants-water"]
        )
    )
    splits = {(t.apps[0], t.split) for t in novel}
    assert splits == {("mail", "train"), ("plants", "rl"), ("plants", "test")}
    assert "plants" in NOVEL_APPS
    with pytest.raises(TaskError, match="unknown task families"):
        family_names("mail-star,nope")


def test_the_novel_apps_experiment_holds_out_exactly_the_novel_split() -> None:
    # an RL-only family on a training app is not novel: the experiment refuses it
    with pytest.raises(ConfigError, match="not on a novel app"):
        load_tasks(TasksConfig(pool="families:mail-star", novel_families=["contacts-favorite"]))


def test_per_name_ids_follow_the_name_and_cited_ids_are_in_the_instruction() -> None:
    seen: dict[str, str] = {}
    for t in family_tasks(["mail-star"], 30, 5, ids="per_name"):
        for m in t.initial_state["mail"]["messages"]:
            assert seen.setdefault(m["subject"], m["id"]) == m["id"]
    assert len(set(seen.values())) == len(seen)  # one id per name, distinct
    for t in family_tasks(["contacts-favorite"], 5, 0, cite_ids=True):
        cited = t.golden[0].split('"')[1].removeprefix("contact-")
        assert f"({cited}):" in t.instruction
    with pytest.raises(TaskError):
        family_tasks(["mail-star"], 1, 0, ids="sequential")


def test_fake_pick_instances_verify_the_golden_click_only() -> None:
    from maigym_ray.testing.learning import HELDOUT_SEED0, fake_pick_task

    for seed in (*range(10), *range(HELDOUT_SEED0, HELDOUT_SEED0 + 10)):
        for ids in ("random", "per_label"):
            t = fake_pick_task(seed, ids=ids)
            target = t.golden[0].split('"')[1]
            assert f"[{target}] button" in t.initial_state["fake"]["screens"][0]
            assert t.split == ("test" if seed >= HELDOUT_SEED0 else "train")
            ok = {"fake": {"clicked": [{"id": target}]}}
            assert run_verifier(t.verifier, ok, None).success
            other = next(
                ln.split("]")[0][1:]
                for ln in t.initial_state["fake"]["screens"][0].splitlines()
                if target not in ln
            )
            both = {"fake": {"clicked": [{"id": target}, {"id": other}]}}
            assert not run_verifier(t.verifier, both, None).success


def test_the_compact_fake_pick_prompt_keeps_the_task_and_only_the_actions_the_family_needs() -> None:
    from maigym_ray.harness.prompt import PromptBuilder, PromptConfig
    from maigym_ray.testing.learning import PICK_SYSTEM, fake_pick_task

    t = fake_pick_task(3)
    full = PromptBuilder(str.split).system_text(t, "web")
    compact = PromptBuilder(str.split, PromptConfig(system=PICK_SYSTEM)).system_text(t, "web")
    assert compact == (
        'Elements are listed as [id] role "name".\n'
        'Reply with one action: click(id="ID") or terminate(status="success").\n'
        f"Task: {t.instruction}"
    )
    assert compact.endswith(f"Task: {t.instruction}")
    assert "click(id=" in compact and "terminate(" in compact
    assert "scroll(" in full and "scroll(" not in compact
    assert len(compact) * 4 < len(full)
