"""Policy-adaptive task sampling for GRPO (pure Python; its state is saved with checkpoints).

A GRPO group only carries gradient when its attempts disagree. The sampler therefore tracks each task's
recent success rate under the current policy and spends the rollout budget where groups can disagree:
- tasks that are sometimes solved (0 < p < eta), and tasks not seen yet, get the full group size G; up to
  ``learning_share`` of a round's groups go to the sometimes-solved ones before any unseen one is drawn;
- never-solved tasks (no success in their recent attempts) and mastered tasks (p >= eta) get a small probing
  group, and only now and then, so a task that becomes solvable (or regresses) is noticed.
The share of rollouts that land in zero-variance groups is the figure to watch (benchmarks/sampler.py).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import ConfigError


@dataclass
class SamplerConfig:
    """Group sizes and thresholds of the adaptive sampler."""

    #: G: attempts for an informative task.
    group_size: int = 8
    #: attempts for a probe of a never-solved or mastered task.
    probe_size: int = 2
    #: success rate at and above which a task counts as mastered.
    eta: float = 0.8
    #: the chance that a never-solved or mastered task is probed in a round where there is room for it.
    probe_rate: float = 0.25
    #: recent outcomes per task that define its success rate (older ones are forgotten: the policy moves).
    window: int = 16
    #: "adaptive" or "uniform" (every task equally likely, always G attempts: the baseline).
    mode: str = "adaptive"
    #: the most of a round's groups (a share, 0..1) that go to "learning" tasks before unseen ones. At 0 the two
    #: are drawn alike; among many tasks, such as a family's per-episode instances, a task whose group
    #: disagreed is then hardly ever drawn again, though its next group is the likeliest to carry gradient.
    learning_share: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in ("adaptive", "uniform"):
            raise ConfigError(f"sampler mode {self.mode!r}: choose adaptive or uniform")
        if not 0.0 <= self.learning_share <= 1.0:
            raise ConfigError(f"sampler.learning_share={self.learning_share}: need a share in [0, 1]")


class AdaptiveSampler:
    """Chooses which tasks to roll out each round and with how many attempts."""

    def __init__(self, task_ids: list[str], cfg: SamplerConfig | None = None, seed: int = 0) -> None:
        self.cfg = cfg or SamplerConfig()
        self.task_ids = list(task_ids)
        self.rng = random.Random(seed)
        self.outcomes: dict[str, deque[int]] = {t: deque(maxlen=self.cfg.window) for t in self.task_ids}

    def success_rate(self, task_id: str) -> float | None:
        """Recent success rate, or None before any attempt."""
        o = self.outcomes[task_id]
        return sum(o) / len(o) if o else None

    def category(self, task_id: str) -> str:
        """ "unseen", "learning" (sometimes solved), "never" (no recent success) or "mastered"."""
        p = self.success_rate(task_id)
        if p is None:
            return "unseen"
        if p == 0.0:
            return "never"
        return "mastered" if p >= self.cfg.eta else "learning"

    def plan(self, num_groups: int) -> list[tuple[str, int]]:
        """Up to ``num_groups`` (task_id, attempts) pairs for the next round."""
        ids = self.task_ids[:]
        self.rng.shuffle(ids)
        if self.cfg.mode == "uniform":
            return [(t, self.cfg.group_size) for t in ids[:num_groups]]
        category = {t: self.category(t) for t in ids}
        informative = [t for t in ids if category[t] in ("learning", "unseen")]
        # Learning tasks first, up to the quota (none at share 0: the order stays the shuffled one).
        quota = int(self.cfg.learning_share * num_groups)
        first = [t for t in informative if category[t] == "learning"][:quota]
        taken = set(first)
        informative = first + [t for t in informative if t not in taken]
        skip = set(informative)
        rest = [t for t in ids if t not in skip and self.rng.random() < self.cfg.probe_rate]
        chosen = [(t, self.cfg.group_size) for t in informative[:num_groups]]
        chosen += [(t, self.cfg.probe_size) for t in rest[: num_groups - len(chosen)]]
        return chosen

    def update(self, task_id: str, rewards: list[float]) -> None:
        """Records one group's rewards (success = reward >= 0.5)."""
        self.outcomes[task_id].extend(int(r >= 0.5) for r in rewards)

    def stats(self) -> dict[str, int]:
        """How many tasks are in each category."""
        out = {"unseen": 0, "learning": 0, "never": 0, "mastered": 0}
        for t in self.task_ids:
            out[self.category(t)] += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state for checkpoints (outcomes and the RNG)."""
        return {"outcomes": {t: list(o) for t, o in self.outcomes.items()}, "rng": self.rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a ``state_dict`` (tasks unknown to it start unseen)."""
        for t, o in state["outcomes"].items():
            if t in self.outcomes:
                self.outcomes[t].extend(o)
        rng = state["rng"]
        self.rng.setstate((rng[0], tuple(rng[1]), rng[2]))
