"""The diagnosis loop's logic: group an eval run's failures and pick the weakest groups to synthesise for.

An eval ``results.parquet`` row says whether an episode succeeded, how many steps it took, how many of its
model turns failed to parse, and the verifier's reason. Joined with the pool's tasks (template, tier, kind,
max_steps), each failure gets one kind:

- ``parse_error``: half or more of the episode's turns were not valid actions;
- ``step_limit``: the episode used all of the task's steps;
- ``wrong_answer``: an information task that ended with the wrong (or no) answer;
- ``wrong_screen``: a state-changing task that ended with the wrong state: the agent acted on the wrong
  screen or record, or stopped early.

Episodes that failed for infrastructure reasons are not the agent's failures and are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from maigym_ray.synth.generate import task_tag
from maigym_ray.types import TaskSpec

KINDS = ("parse_error", "step_limit", "wrong_answer", "wrong_screen")


def failure_kind(row: dict[str, Any], task: TaskSpec) -> str:
    """The kind of one failed episode (see the module docstring)."""
    steps = int(row.get("steps") or 0)
    if steps and int(row.get("parse_errors") or 0) * 2 >= steps:
        return "parse_error"
    if steps >= task.max_steps:
        return "step_limit"
    return "wrong_answer" if task_tag(task, "kind") == "info" else "wrong_screen"


@dataclass
class Group:
    """Episodes of one (app, template, tier) group."""

    app: str
    template: str
    tier: str
    episodes: int = 0
    successes: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

    @property
    def success_rate(self) -> float:
        """Successes over scored episodes."""
        return self.successes / self.episodes if self.episodes else 0.0


def group_failures(rows: Iterable[dict[str, Any]], tasks: dict[str, TaskSpec]) -> list[Group]:
    """Groups scored episodes by (start app, template, tier); rows of tasks not in ``tasks`` are skipped."""
    groups: dict[tuple[str, str, str], Group] = {}
    for r in rows:
        task = tasks.get(r["task_id"])
        if task is None or r.get("infra_failed"):
            continue
        key = (task.apps[0], task_tag(task, "template"), task_tag(task, "tier"))
        g = groups.setdefault(key, Group(*key))
        g.episodes += 1
        if r["success"]:
            g.successes += 1
        else:
            g.kinds[failure_kind(r, task)] += 1
    return sorted(groups.values(), key=lambda g: (g.app, g.template, g.tier))


def weakest(groups: list[Group], n: int, min_episodes: int = 1) -> list[Group]:
    """The ``n`` groups with the lowest success rate (more episodes first on ties), among those with at least
    ``min_episodes`` episodes and at least one failure."""
    ranked = [g for g in groups if g.episodes >= min_episodes and g.successes < g.episodes]
    return sorted(ranked, key=lambda g: (g.success_rate, -g.episodes, g.template))[:n]


def diagnosis_table(groups: list[Group]) -> str:
    """One line per group: episodes, success and the failure kinds."""
    head = f"{'app':10s} {'template':24s} {'tier':>4s} {'eps':>5s} {'success':>8s} " + " ".join(
        f"{k:>12s}" for k in KINDS
    )
    lines = [head]
    for g in groups:
        lines.append(
            f"{g.app:10s} {g.template:24s} {g.tier:>4s} {g.episodes:5d} {g.success_rate:8.2f} "
            + " ".join(f"{g.kinds.get(k, 0):12d}" for k in KINDS)
        )
    return "\n".join(lines)


def next_version_name(pool_name: str) -> str:
    """``pool.parquet`` -> ``pool_v2.parquet``; ``pool_v2.parquet`` -> ``pool_v3.parquet``."""
    stem = pool_name.rsplit(".", 1)[0]
    base, _, ver = stem.rpartition("_v")
    if base and ver.isdigit():
        return f"{base}_v{int(ver) + 1}.parquet"
    return f"{stem}_v2.parquet"
