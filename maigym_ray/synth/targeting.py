"""Failure clusters by app, screen and action, and new tasks aimed at the weakest of them.

The diagnosis loop (runtime/diagnosis_loop.py) evaluates a policy, clusters its held-out failures, synthesises
tasks for the weakest clusters and trains on them. A spec-derived single-action task (synth/spec_tasks.py) does
one action on one record: its cluster is (start app, the list screen its golden opens, the action's kind), e.g.
``("photos", "library", "toggle")``. Tasks of one cluster differ only in the record, so a held-out task of a
cluster tests what training on the cluster's other records taught.

:func:`partition` splits the candidate tasks of every cluster into held-out tasks, base tasks (the first
training set) and a reservoir that each round's new tasks are drawn from: :func:`draw_targeted` takes them from
the weakest clusters, :func:`draw_random` (the control arm) from all clusters alike. Both draw without
replacement, so no task is trained on twice and none of them is ever held out.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from maigym_ray.actions import parse_action
from maigym_ray.errors import ActionParseError, ConfigError
from maigym_ray.synth.generate import task_tag
from maigym_ray.types import TaskSpec

#: a cluster: (app, screen, action kind)
Cluster = tuple[str, str, str]

_NAV = re.compile(r'click\(id="nav-([^"]+)"\)')


def cluster_of(task: TaskSpec) -> Cluster:
    """The (app, screen, action) cluster of a spec-derived task: its start app, the first screen its golden
    solution opens from the nav bar ("?" when it opens none, as a create from the home screen does), and its
    first ``action:`` tag ("?" when it has none)."""
    screen = next((m.group(1) for step in task.golden if (m := _NAV.fullmatch(step))), "?")
    return (task.start_app or task.apps[0], screen, task_tag(task, "action"))


#: where a failed single-action episode left its golden path (:func:`went_wrong_at`)
STAGES = ("navigate", "record", "action", "finish")


def went_wrong_at(task: TaskSpec, actions: Sequence[str]) -> str:
    """The stage at which an episode's actions first differ from the golden solution's: ``navigate`` (the nav
    bar, to the list screen), ``record`` (the record on that screen), ``action`` (the action's own steps on the
    record's screen) or ``finish`` (every golden step taken, then a wrong step or none). Actions are compared
    as parsed, so spacing and quoting do not count; a reply that did not parse differs from any step."""

    i = matched_steps(task, actions)
    return STAGES[min(i, 2)] if i < len(task.golden) else "finish"


def matched_steps(task: TaskSpec, actions: Sequence[str]) -> int:
    """How many of the golden solution's steps an episode took, in order, before its first other step."""
    for i, want in enumerate(task.golden):
        if i >= len(actions) or _norm(actions[i]) != _norm(want):
            return i
    return len(task.golden)


def _norm(text: str) -> str | None:
    try:
        return parse_action(text).to_text()
    except ActionParseError:
        return None


@dataclass
class ClusterOutcome:
    """Scored episodes of one cluster."""

    cluster: Cluster
    episodes: int = 0
    successes: int = 0
    #: summed over the episodes: the share of the golden solution's steps each took before it went astray
    progress: float = 0.0

    @property
    def success_rate(self) -> float:
        """Successes over scored episodes (0 with none)."""
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def mean_progress(self) -> float:
        """The mean share of the golden path the episodes followed (0 with none)."""
        return self.progress / self.episodes if self.episodes else 0.0


def cluster_outcomes(
    rows: Iterable[dict[str, Any]], tasks: dict[str, TaskSpec]
) -> dict[Cluster, ClusterOutcome]:
    """Scored episodes by cluster. ``rows`` are episodes (``task_id``, ``success``, ``infra_failed`` and the
    policy's ``actions``, if known); an infra-failed episode is no verdict on the policy and is left out, and so
    is a row whose task is not in ``tasks``."""
    out: dict[Cluster, ClusterOutcome] = {}
    for r in rows:
        task = tasks.get(r["task_id"])
        if task is None or r.get("infra_failed"):
            continue
        key = cluster_of(task)
        o = out.setdefault(key, ClusterOutcome(key))
        o.episodes += 1
        o.successes += bool(r["success"])
        o.progress += 1.0 if r["success"] else matched_steps(task, r.get("actions") or []) / len(task.golden)
    return out


def success_on(outcomes: dict[Cluster, ClusterOutcome], clusters: Iterable[Cluster]) -> float | None:
    """Pooled success over ``clusters`` (episodes weighted alike); None when none of them has an episode."""
    picked = [outcomes[c] for c in clusters if c in outcomes]
    episodes = sum(o.episodes for o in picked)
    return sum(o.successes for o in picked) / episodes if episodes else None


def weakest_clusters(
    outcomes: dict[Cluster, ClusterOutcome], n: int, available: dict[Cluster, int] | None = None
) -> list[Cluster]:
    """The ``n`` clusters with the lowest held-out success that still have a failure. Ties go to the cluster
    whose episodes followed less of their golden paths (a policy that cannot find the screen is further off
    than one that picks the wrong record there), then to the name, so the choice is a function of the outcomes
    alone. With ``available`` (reservoir tasks left per cluster), clusters with none left are passed over."""
    ranked = [
        o
        for o in outcomes.values()
        if o.successes < o.episodes and (available is None or available.get(o.cluster, 0) > 0)
    ]
    ranked.sort(key=lambda o: (o.success_rate, o.mean_progress, o.cluster))
    return [o.cluster for o in ranked[:n]]


@dataclass
class Partition:
    """Candidate tasks by role (see :func:`partition`)."""

    heldout: list[TaskSpec]
    base: list[TaskSpec]
    #: per cluster, the tasks new ones are drawn from, in a seeded order
    reservoir: dict[Cluster, list[TaskSpec]] = field(default_factory=dict)

    @property
    def clusters(self) -> list[Cluster]:
        """Every cluster, sorted."""
        return sorted(self.reservoir)


def partition(
    candidates: Sequence[TaskSpec], heldout_per: int, base_per: int, min_reservoir: int, seed: int
) -> Partition:
    """Splits ``candidates`` cluster by cluster, after a seeded shuffle: ``heldout_per`` held-out tasks,
    ``base_per`` base tasks and the rest a reservoir. Clusters with fewer than ``heldout_per + base_per +
    min_reservoir`` tasks are left out whole. The held-out tasks are relabelled split ``test``, every other
    ``train``."""
    if heldout_per < 1 or base_per < 0 or min_reservoir < 1:
        raise ConfigError(
            f"partition needs heldout_per >= 1, base_per >= 0 and min_reservoir >= 1 "
            f"(got {heldout_per}, {base_per}, {min_reservoir})"
        )
    by: dict[Cluster, list[TaskSpec]] = {}
    for t in candidates:
        by.setdefault(cluster_of(t), []).append(t)
    rng = random.Random(seed)
    part = Partition([], [])
    for key in sorted(by):
        tasks = sorted(by[key], key=lambda t: t.id)
        if len(tasks) < heldout_per + base_per + min_reservoir:
            continue
        rng.shuffle(tasks)
        part.heldout += [_as_split(t, "test") for t in tasks[:heldout_per]]
        part.base += [_as_split(t, "train") for t in tasks[heldout_per : heldout_per + base_per]]
        part.reservoir[key] = [_as_split(t, "train") for t in tasks[heldout_per + base_per :]]
    return part


def _as_split(task: TaskSpec, split: str) -> TaskSpec:
    return replace(task, split=split)


def draw_targeted(
    reservoir: dict[Cluster, list[TaskSpec]], clusters: Sequence[Cluster], n: int
) -> list[TaskSpec]:
    """``n`` tasks from ``clusters``' reservoirs, taken in turn (the weakest first), removed from the reservoir.
    Fewer come back when the clusters run out."""
    out: list[TaskSpec] = []
    while len(out) < n and any(reservoir.get(c) for c in clusters):
        for c in clusters:
            if len(out) < n and reservoir.get(c):
                out.append(reservoir[c].pop(0))
    return out


def draw_random(reservoir: dict[Cluster, list[TaskSpec]], n: int, rng: random.Random) -> list[TaskSpec]:
    """``n`` tasks drawn uniformly from every cluster's reservoir together, removed from it."""
    pool = [(c, i) for c in sorted(reservoir) for i in range(len(reservoir[c]))]
    picked = rng.sample(pool, min(n, len(pool)))
    out = [reservoir[c][i] for c, i in picked]
    for c in {c for c, _ in picked}:
        taken = {i for cc, i in picked if cc == c}
        reservoir[c] = [t for i, t in enumerate(reservoir[c]) if i not in taken]
    return out
