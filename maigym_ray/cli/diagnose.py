"""``python -m maigym_ray.cli.diagnose``: from an eval run's failures to a new pool version.

Reads the run's ``results.parquet`` and the pool it ran, groups failures by app, template, tier and error
kind (parse errors, wrong screen, step limit, wrong answer; see :mod:`maigym_ray.synth.diagnosis`), prints
that table, then synthesises new worlds' tasks for the weakest groups' templates, validates them live like
any synthesised task, and writes the old pool plus the new tasks as the next version
(``pool.parquet`` -> ``pool_v2.parquet``) with ``diagnosis.json`` beside it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hydra
import pyarrow.parquet as pq
from omegaconf import DictConfig, OmegaConf

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.errors import ConfigError, TaskError
from maigym_ray.runtime.schema import DiagnoseConfig, register
from maigym_ray.runtime.synthesis import validate_live
from maigym_ray.synth.diagnosis import diagnosis_table, group_failures, next_version_name, weakest
from maigym_ray.synth.generate import generate, task_tag
from maigym_ray.tasks.pool import TaskPool

register()


async def diagnose(cfg: DiagnoseConfig) -> dict[str, Any]:
    """Runs the loop; returns what ``diagnosis.json`` holds."""
    if not cfg.results or not cfg.pool:
        raise ConfigError(
            "diagnose needs results=<eval run>/results.parquet and pool=<synthesised pool>.parquet"
        )
    try:
        rows = pq.read_table(cfg.results).to_pylist()
    except (OSError, ValueError) as exc:
        raise TaskError(f"{cfg.results}: not a readable eval results file ({exc})") from exc
    pool = TaskPool.load(cfg.pool)
    tasks = {t.id: t for t in pool}
    groups = group_failures(rows, tasks)
    if not groups:
        raise TaskError(f"no episode of {cfg.results} belongs to a task of {cfg.pool}")
    print(diagnosis_table(groups))
    weak = weakest(groups, cfg.weakest, cfg.min_episodes)
    templates = sorted({g.template for g in weak} - {"?"})
    worlds = [int(task_tag(t, "world", "-1")) for t in pool]
    first = max(worlds) + 1
    seeds = list(range(first, first + cfg.worlds))
    new, rejected = generate(seeds, templates, cfg.synth.test_every) if templates else ([], [])
    if cfg.synth.validate and new:
        verdicts, _ = await validate_live(cfg.synth, new)
        ok = {v.task_id for v in verdicts if v.ok}
        rejected_live = [asdict(v) for v in verdicts if not v.ok]
        new = [t for t in new if t.id in ok]
    else:
        rejected_live = []
    out = Path(cfg.output) if cfg.output else Path(cfg.pool).with_name(next_version_name(Path(cfg.pool).name))
    TaskPool([*pool, *new]).save(out)
    report = {
        "results": cfg.results,
        "pool": cfg.pool,
        "new_pool": str(out),
        "groups": [
            {
                **{k: v for k, v in asdict(g).items() if k != "kinds"},
                "kinds": dict(g.kinds),
                "rate": g.success_rate,
            }
            for g in groups
        ],
        "weakest": [(g.app, g.template, g.tier, g.success_rate) for g in weak],
        "templates": templates,
        "new_worlds": seeds,
        "new_tasks": len(new),
        "rejected": len(rejected) + len(rejected_live),
        "pool_tasks": len(pool) + len(new),
    }
    out.with_name(out.stem + ".diagnosis.json").write_text(json.dumps(report, indent=2))
    return report


@hydra.main(config_path="../../conf", config_name="diagnose", version_base="1.3")
def main(dcfg: DictConfig) -> None:
    """Hydra entry point."""
    cfg: DiagnoseConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
    report = asyncio.run(diagnose(cfg))
    print(
        f"weakest: {report['weakest']}\nnew tasks: {report['new_tasks']} (rejected {report['rejected']}) "
        f"-> {report['new_pool']} ({report['pool_tasks']} tasks)"
    )


if __name__ == "__main__":
    main()
