"""From worlds to candidate tasks: instantiate every template, plan its golden solution, pre-check in-process.

``generate(world_seeds)`` returns TaskSpecs ready for live validation plus the drafts it rejected on the way
(the plan did not fit the screens; the verifier already passes on the initial state; the planned golden
solution does not satisfy the verifier). The in-process pre-check is cheap and catches most broken templates
before they cost a browser; :mod:`maigym_ray.synth.validation` repeats the checks on a live instance, which is
what admits a task to a pool.

Splits: a task that touches a novel app (:data:`~maigym_ray.apps.registry.NOVEL_APPS`) is ``ood_app``; of the
rest, the tasks of every ``test_every``-th world are ``test`` (held-out worlds on the training apps) and the
others ``train``. Tags carry ``template:``, ``tier:`` (1: at most 3 golden actions, 2: 4-7, 3: 8 or more),
``kind:`` (info or state), ``cross_app`` or ``single_app``, ``scenario:`` and ``world:``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from maigym_ray.apps.registry import NOVEL_APPS, make_apps
from maigym_ray.errors import AppError, TaskError
from maigym_ray.synth import cross_app, curriculum  # noqa: F401  (they register their templates)
from maigym_ray.synth.planner import plan_golden
from maigym_ray.synth.templates import DEFAULT_TEMPLATES, TEMPLATES, Draft
from maigym_ray.synth.world import World, make_world
from maigym_ray.tasks.verifiers import run_verifier
from maigym_ray.types import TaskSpec


@dataclass(frozen=True)
class Rejection:
    """A task that did not make it, and why (``reason`` is a short category, ``detail`` the specifics)."""

    task_id: str
    template: str
    reason: str
    detail: str


def task_tag(task: TaskSpec, key: str, default: str = "?") -> str:
    """The value of one of the ``key:value`` tags written here (template, tier, kind, scenario, world)."""
    return next((t.split(":", 1)[1] for t in task.tags if t.startswith(key + ":")), default)


def tier(golden_len: int) -> int:
    """Difficulty tier by golden-solution length."""
    return 1 if golden_len <= 3 else 2 if golden_len <= 7 else 3


def split_of(apps: Iterable[str], world_seed: int, test_every: int) -> str:
    """``ood_app`` for novel apps, ``test`` for held-out worlds, else ``train``."""
    if set(apps) & set(NOVEL_APPS):
        return "ood_app"
    return "test" if test_every and world_seed % test_every == 0 else "train"


def _initial_states(seeds: dict[str, Any], apps: tuple[str, ...]) -> dict[str, Any]:
    live = make_apps(list(apps))
    for name, app in live.items():
        app.seed(seeds.get(name, {}))
    return {name: app.state() for name, app in live.items()}


def draft_to_task(
    draft: Draft, world: World, k: int, test_every: int, world_seeds: dict[str, Any] | None = None
) -> TaskSpec | Rejection:
    """Plans one draft and pre-checks it in-process; a TaskSpec, or the Rejection that says why not.
    ``world_seeds`` is ``world.seeds()`` when the caller already has it (one world, many drafts)."""
    task_id = draft.task_id or f"{draft.template}-w{world.seed}-{k}"
    if draft.seeds is not None:
        seeds = draft.seeds
    else:
        all_seeds = world_seeds if world_seeds is not None else world.seeds()
        seeds = {app: all_seeds[app] for app in draft.apps}
    verifier = draft.verifier or {"name": "checks", "params": {"checks": [dict(c) for c in draft.checks]}}
    try:
        golden, final = plan_golden(draft.plan, seeds, draft.apps[0], draft.apps)
    except (TaskError, AppError) as exc:
        return Rejection(task_id, draft.template, "plan_does_not_fit_screens", str(exc))
    try:
        before = run_verifier(verifier, _initial_states(seeds, draft.apps), None)
        after = run_verifier(verifier, {a: final[a] for a in draft.apps}, final["__answer__"])
    except TaskError as exc:
        return Rejection(task_id, draft.template, "verifier_error", str(exc))
    if before.success:
        return Rejection(task_id, draft.template, "verifier_passes_initial_state", before.reason)
    if not after.success:
        return Rejection(task_id, draft.template, "golden_misses_goal", after.reason)
    t = tier(len(golden))
    return TaskSpec(
        id=task_id,
        instruction=draft.instruction,
        apps=draft.apps,
        platforms=("web", "mobile_web"),
        initial_state=seeds,
        start_app=draft.apps[0],
        verifier=verifier,
        golden=tuple(golden),
        max_steps=draft.max_steps or max(8, 2 * len(golden) + 2),
        tags=(
            f"template:{draft.template}",
            f"tier:{t}",
            f"kind:{draft.kind}",
            "cross_app" if len(draft.apps) > 1 else "single_app",
            f"scenario:{world.scenario}",
            f"world:{world.seed}",
            *draft.tags,
        ),
        split=draft.split or split_of(draft.apps, world.seed, test_every),
    )


def drafts_for(world: World, templates: Iterable[str] | None = None) -> list[Draft]:
    """Every template's drafts for ``world``; each template gets its own seeded RNG (stable when the template
    set changes)."""
    out: list[Draft] = []
    for name in templates or sorted(DEFAULT_TEMPLATES):
        fn, _ = TEMPLATES[name]
        out += fn(world, random.Random(f"{world.seed}:{name}"))
    return out


def generate(
    world_seeds: Iterable[int], templates: Iterable[str] | None = None, test_every: int = 5
) -> tuple[list[TaskSpec], list[Rejection]]:
    """Candidate tasks of the given worlds, pre-checked in-process, and the rejections."""
    names = list(templates) if templates is not None else sorted(DEFAULT_TEMPLATES)
    unknown = [n for n in names if n not in TEMPLATES]
    if unknown:
        raise TaskError(f"unknown template(s) {unknown}; valid: {', '.join(sorted(TEMPLATES))}")
    tasks: list[TaskSpec] = []
    rejected: list[Rejection] = []
    for seed in world_seeds:
        world = make_world(seed)
        world_seeds = world.seeds()  # once per world, not once per draft
        counts: dict[str, int] = {}
        for draft in drafts_for(world, names):
            k = counts.get(draft.template, 0)
            counts[draft.template] = k + 1
            out = draft_to_task(draft, world, k, test_every, world_seeds)
            (tasks if isinstance(out, TaskSpec) else rejected).append(out)  # type: ignore[arg-type]
    return tasks, rejected
