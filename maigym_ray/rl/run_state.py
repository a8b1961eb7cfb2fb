"""The training run's state besides tensors (``RunState``, JSON in every checkpoint) and which checkpoint a resumed
run loads (``sealed_checkpoint``). rl/driver.py writes them; rl.driver re-exports both."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maigym_ray.durable import check_sealed


@dataclass
class RunState:
    """Everything a checkpoint needs besides tensors (JSON)."""

    phase: str = "start"  # start → before → sft → rl → done
    round: int = 0
    version: int = 0
    heldout: dict[str, float] = field(default_factory=dict)
    #: mean steps of the held-out episodes of each eval (scored episodes only).
    heldout_steps: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    sampler: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    wandb_id: str = ""


PHASES = ("start", "before", "sft", "rl", "done")


def sealed_checkpoint(root: Path) -> Path | None:
    """The checkpoint to resume from: the one ``latest`` names if it is sealed and whole, else the newest other
    sealed one. An incomplete or truncated checkpoint is skipped with a warning, never loaded."""
    latest = root / "latest"
    named = [root / latest.read_text().strip()] if latest.is_file() else []
    others = sorted((p for p in root.glob("ckpt-*") if p not in named), key=lambda p: p.stat().st_mtime)
    for path in [*named, *reversed(others)]:
        problem = check_sealed(path)
        if problem is None:
            return path
        logging.getLogger(__name__).warning("skipping checkpoint %s: %s", path.name, problem)
    return None
