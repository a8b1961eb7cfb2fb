"""The debug curriculum's split: held-out tasks are new combinations of skills that training teaches."""

from __future__ import annotations

import pytest

from maigym_ray.actions import parse_action
from maigym_ray.tasks.curriculum import HELDOUT, curriculum_tasks
from maigym_ray.tasks.pool import TaskPool

pytestmark = pytest.mark.unit


def test_every_heldout_verb_and_object_is_trained_but_never_together() -> None:
    tasks = curriculum_tasks()
    TaskPool(tasks)  # unique ids
    train = {tuple(t.id.split("-")[1:]) for t in tasks if t.split == "train"}
    test = {tuple(t.id.split("-")[1:]) for t in tasks if t.split == "test"}
    assert test == set(HELDOUT) and not train & test
    for verb, obj in test:
        assert any(v == verb for v, _ in train) and any(o == obj for _, o in train)


def test_goldens_parse_end_in_terminate_and_fit_the_step_budget() -> None:
    for t in curriculum_tasks():
        assert all(parse_action(a) for a in t.golden)
        assert t.golden[-1] == 'terminate(status="success")' and len(t.golden) < t.max_steps
        assert t.instruction.endswith(".") and t.verifier["name"] == "checks"


def test_heldout_pairs_are_a_latin_square_over_mail() -> None:
    # one held-out verb per email, each mail verb held out for two emails: neither side predicts the other
    test = [tuple(t.id.split("-")[1:]) for t in curriculum_tasks() if t.split == "test"]
    objects = [o for _, o in test]
    verbs = [v for v, _ in test]
    assert sorted(objects) == [f"m{i}" for i in range(1, 9)]
    assert {v: verbs.count(v) for v in verbs} == {"open": 2, "star": 2, "archive": 2, "trash": 2}


def test_the_object_leads_and_the_verb_ends_every_instruction() -> None:
    # The verb sits right before the model's turn (tasks/curriculum.py says why); the object part is the same
    # text whatever the verb, so it sits at the same place.
    heads: dict[str, set[str]] = {}
    words: dict[str, set[str]] = {}
    for t in curriculum_tasks():
        verb, obj = t.id.split("-")[1:]
        head, tail = t.instruction.rsplit(": ", 1)
        assert tail.endswith(" it.") and len(tail.split()) == 2
        heads.setdefault(obj, set()).add(head)
        words.setdefault(verb, set()).add(tail.split()[0])
    assert all(len(h) == 1 for h in heads.values())
    assert all(len(w) == 1 for w in words.values()) and len(set.union(*words.values())) == len(words)
