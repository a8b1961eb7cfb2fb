"""Checking a hand-written task file on live instances: what ``python -m maigym_ray.cli.validate_tasks`` runs.

The same gate synthesised tasks pass (:mod:`maigym_ray.synth.validation`): on a leased web instance, the verifier
gives 0 on the initial state, 1 after the golden solution, and a reset restores the initial state. Loading the
file first catches what needs no instance (an unknown check op, a seed of the wrong type, a golden action that
does not parse). Tasks that run on no web platform are listed as not checked, not passed: the validation pool
is a web one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from maigym_ray.runtime.schema import SynthConfig
from maigym_ray.runtime.synthesis import validate_live
from maigym_ray.synth.validation import Verdict
from maigym_ray.tasks.pool import TaskPool

#: The platforms the web validation pool serves (mobile_web is the same app in a touch viewport).
WEB_PLATFORMS = frozenset({"web", "mobile_web"})


@dataclass(frozen=True)
class FileReport:
    """Per-task verdicts of one file, plus the tasks it could not check here and why."""

    verdicts: list[Verdict]
    not_checked: dict[str, str]

    @property
    def ok(self) -> bool:
        """Every checked task passed (tasks not checked are said, not counted as passes or failures)."""
        return all(v.ok for v in self.verdicts)


def check_file(path: str | Path, cfg: SynthConfig | None = None) -> FileReport:
    """Loads ``path`` (a TaskError if the file is malformed) and validates its web tasks live."""
    tasks = list(TaskPool.load(path))
    cfg = cfg or SynthConfig()
    web = [t for t in tasks if WEB_PLATFORMS & set(t.platforms)]
    skipped = {
        t.id: f"runs on {', '.join(t.platforms)}; this check leases web instances only"
        for t in tasks
        if t not in web
    }
    verdicts, _ = asyncio.run(validate_live(cfg, web, desc="validate")) if web else ([], {})
    return FileReport(verdicts, skipped)


def format_report(report: FileReport) -> str:
    """One line per task (PASS, FAIL with the reason and detail, or SKIP), then the totals."""
    lines = []
    for v in report.verdicts:
        mark = "PASS" if v.ok else "FAIL"
        why = "" if v.ok else f"  {v.reason}: {v.detail}"
        lines.append(f"{mark}  {v.task_id}  ({v.seconds:.1f}s){why}")
    lines += [f"SKIP  {tid}  {why}" for tid, why in report.not_checked.items()]
    passed = sum(v.ok for v in report.verdicts)
    lines.append(
        f"{passed} passed, {len(report.verdicts) - passed} failed, {len(report.not_checked)} not checked"
    )
    return "\n".join(lines)
