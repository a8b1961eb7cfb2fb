"""Every task kind derived from app specs, for a set of spec apps, sized by one :class:`SpecTaskSizes`.

This is what ``benchmarks/synthesis.py`` validates live. Kinds (each tagged ``template:<kind>``):
``spec_single_action`` (:mod:`~maigym_ray.synth.spec_tasks`), ``spec_chain``, ``spec_search`` and
``spec_create_then`` (:mod:`~maigym_ray.synth.spec_multi`), ``spec_answer`` and ``spec_count``
(:mod:`~maigym_ray.synth.spec_answer`) and ``spec_cross_app`` (:mod:`~maigym_ray.synth.spec_cross_app`).
Task ids are unique; the same sizes and seed give the same tasks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from maigym_ray.apps.registry import APP_CLASSES
from maigym_ray.errors import ConfigError
from maigym_ray.synth.spec_answer import answer_tasks, count_tasks
from maigym_ray.synth.spec_cross_app import cross_app_tasks
from maigym_ray.synth.spec_multi import chain_tasks, create_then_tasks, search_tasks
from maigym_ray.synth.spec_tasks import single_action_tasks


@dataclass(frozen=True)
class SpecTaskSizes:
    """How many tasks of each kind to derive (per app unless said otherwise)."""

    #: records per action for single-action tasks
    per_action: int = 3
    #: two-action chains per app
    chains2: int = 20
    #: three-action chains per app
    chains3: int = 10
    #: search-then-act tasks per app
    search: int = 10
    #: create-then-act tasks per app
    create_then: int = 4
    #: find-and-answer questions per app (count questions come on top, one per list screen)
    answers: int = 20
    #: seed variants per question (the same question on a state where the answer differs), within ``answers``
    answer_variants: int = 0
    #: cross-app tasks in all, spread over ordered pairs of the apps
    cross_app: int = 0
    #: seeds the choice of chains and cross-app pairs
    rng_seed: int = 0

    def __post_init__(self) -> None:
        for k, v in self.__dict__.items():
            if k != "rng_seed" and (not isinstance(v, int) or v < 0):
                raise ConfigError(f"SpecTaskSizes.{k} must be a whole number >= 0, got {v!r}")


#: the sizes ``benchmarks/synthesis.py --quick`` uses, and the full run's
QUICK = SpecTaskSizes(
    per_action=1, chains2=4, chains3=2, search=2, create_then=1, answers=6, answer_variants=1
)
#: sized for >= 5,000 candidates in <= 30 min of validation on 2 cores: short kinds (questions and their seed
#: variants, single actions) carry the count; cross-app tasks are added by the caller for the share it wants
FULL = SpecTaskSizes(
    per_action=8, chains2=8, chains3=2, search=5, create_then=4, answers=200, answer_variants=2
)


def single_app_tasks(
    spec: dict[str, Any], state: dict[str, Any], sizes: SpecTaskSizes
) -> list[dict[str, Any]]:
    """Task records of every single-app kind over one checked spec and its app's default ``state`` (the spec
    need not be registered: the spec writer derives tasks from drafts this way)."""
    return [
        *single_action_tasks(spec, state, sizes.per_action),
        *chain_tasks(spec, state, sizes.chains2, sizes.rng_seed, 2),
        *chain_tasks(spec, state, sizes.chains3, sizes.rng_seed, 3),
        *search_tasks(spec, state, sizes.search),
        *create_then_tasks(spec, state, sizes.create_then),
        *answer_tasks(spec, state, sizes.answers, sizes.answer_variants),
        *count_tasks(spec, state),
    ]


def derive_spec_tasks(apps: Sequence[str], sizes: SpecTaskSizes) -> list[dict[str, Any]]:
    """Task records (TaskSpec JSON) of every kind over the spec apps ``apps`` (cross-app ones among them)."""
    specs, states = [], {}
    for name in apps:
        cls = APP_CLASSES[name]
        spec = getattr(cls, "SPEC", None)
        if spec is None:
            raise ConfigError(f"app {name!r} is not a spec app; tasks are derived from spec apps only")
        specs.append(spec)
        states[name] = cls().state()
    out: list[dict[str, Any]] = []
    for spec in specs:
        out += single_app_tasks(spec, states[spec["name"]], sizes)
    if sizes.cross_app and len(specs) > 1:
        out += cross_app_tasks(specs, states, sizes.cross_app, sizes.rng_seed)
    dup = [k for k, n in Counter(t["id"] for t in out).items() if n > 1]
    if dup:  # a derivation bug, not a user error: two kinds named two tasks alike
        raise RuntimeError(f"derived task ids are not unique: {dup[:5]}")
    return out


def derive_with_cross_share(apps: Sequence[str], sizes: SpecTaskSizes, ratio: float) -> list[dict[str, Any]]:
    """The single-app kinds of :func:`derive_spec_tasks`, plus ``ratio`` times as many cross-app tasks
    (``sizes.cross_app`` is ignored): a ratio of 0.5 makes cross-app tasks a third of the candidates."""
    out = derive_spec_tasks(apps, replace(sizes, cross_app=0))
    n = round(len(out) * ratio)
    if n and len(apps) > 1:
        specs = [APP_CLASSES[a].SPEC for a in apps]  # derive_spec_tasks checked they are spec apps
        out += cross_app_tasks(specs, {a: APP_CLASSES[a]().state() for a in apps}, n, sizes.rng_seed)
    return out


def kind_of(task: dict[str, Any] | Any) -> str:
    """A derived task's kind (its ``template:`` tag)."""
    tags = task["tags"] if isinstance(task, dict) else task.tags
    return next((t.split(":", 1)[1] for t in tags if t.startswith("template:")), "?")
