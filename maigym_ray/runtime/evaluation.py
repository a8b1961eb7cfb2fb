"""Evaluation: run a task pool through the harness on leased environments and score it (eval and collect).

Writes ``results.parquet`` (one row per episode), ``report.json`` and a success table by app and platform
to the run directory, logs to wandb (offline by default) and shows a progress bar. Episodes that hit an
infrastructure failure are retried on a fresh instance and, if they still fail, reported as infra-failed,
never scored 0.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from maigym_ray.config import validate_manager_config
from maigym_ray.durable import atomic_write_text
from maigym_ray.errors import ConfigError
from maigym_ray.rates import fmt_rate, rate
from maigym_ray.runtime.pools import env_for_pool, route_tasks, synthesis_stage
from maigym_ray.runtime.schema import EvalConfig
from maigym_ray.types import TaskSpec, Trajectory

RESULT_SCHEMA = pa.schema(
    [
        ("episode_id", pa.string()),
        ("task_id", pa.string()),
        ("app", pa.string()),
        ("apps", pa.list_(pa.string())),
        ("platform", pa.string()),
        ("split", pa.string()),
        ("attempt", pa.int32()),
        ("success", pa.bool_()),
        ("reward", pa.float64()),
        ("steps", pa.int32()),
        ("parse_errors", pa.int32()),
        ("infra_failed", pa.bool_()),
        ("outcome", pa.string()),
        ("error", pa.string()),
        ("reason", pa.string()),
        ("seconds", pa.float64()),
    ]
)


def result_row(
    traj: Trajectory, task: TaskSpec, platform: str, attempt: int, seconds: float
) -> dict[str, Any]:
    """One results.parquet row."""
    return {
        "episode_id": traj.episode_id,
        "task_id": task.id,
        "app": task.apps[0],
        "apps": list(task.apps),
        "platform": platform,
        "split": task.split,
        "attempt": attempt,
        "success": bool(traj.reward.success) and not traj.infra_failed,
        "reward": traj.reward.value,
        "steps": len(traj.turns),
        "parse_errors": sum(1 for t in traj.turns if t.parse_error),
        "infra_failed": traj.infra_failed,
        "outcome": traj.outcome,
        "error": traj.error,
        "reason": traj.reward.reason,
        "seconds": seconds,
    }


def _outcome(r: dict[str, Any]) -> str:
    """The row's outcome (rows written before the column existed: from ``infra_failed`` and ``success``)."""
    if r.get("outcome"):
        return str(r["outcome"])
    return "infra_failed" if r["infra_failed"] else ("success" if r["success"] else "failure")


#: The success table's columns after app and platform, named like report.json's keys: what each one counts.
TABLE_COLUMNS = ("success_rate", "scored", "task_errors", "infra_failed")


def success_table(rows: list[dict[str, Any]]) -> str:
    """Success rate by app and platform over the scored episodes (success or failure), with the episodes whose
    task is broken (``task_errors``) and those the infrastructure failed (``infra_failed``) counted apart."""
    agg: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in rows:
        a = agg[(r["app"], r["platform"])]
        outcome = _outcome(r)
        if outcome == "task_error":
            a[2] += 1
        elif outcome == "infra_failed":
            a[3] += 1
        else:
            a[0] += int(r["success"])
            a[1] += 1
    head = " ".join(f"{c:>12s}" for c in TABLE_COLUMNS)
    lines = [f"{'app':12s} {'platform':11s} {head}"]

    def line(app: str, plat: str, ok: int, n: int, task_err: int, infra: int) -> str:
        return f"{app:12s} {plat:11s} {fmt_rate(rate(ok, n)):>12s} {n:12d} {task_err:12d} {infra:12d}"

    for (app, plat), a in sorted(agg.items()):
        lines.append(line(app, plat, *a))
    lines.append(line("all", "", *(sum(a[i] for a in agg.values()) for i in range(4))))
    return "\n".join(lines)


def task_error_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per episode whose task is broken, with the reason: printed, not only kept in results.parquet."""
    return [
        f"task error: {r['task_id']} on {r['platform']}: {r.get('error') or r.get('reason') or '(no reason)'}"
        for r in rows
        if _outcome(r) == "task_error"
    ]


def split_success(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Success rate and episode count per task split (train / test / ood_app ...), infra failures excluded."""
    out: dict[str, dict[str, float]] = {}
    for split in sorted({r["split"] for r in rows}):
        scored = [r for r in rows if r["split"] == split and not r["infra_failed"]]
        out[split] = {
            "success_rate": rate(sum(r["success"] for r in scored), len(scored)),
            "episodes": len(scored),
        }
    return out


def split_table(rows: list[dict[str, Any]]) -> str:
    """Success by split, as printed after the app table."""
    lines = [f"{'split':12s} {'success':>8s} {'episodes':>9s}"]
    for split, v in split_success(rows).items():
        lines.append(f"{split:12s} {fmt_rate(v['success_rate']):>8s} {int(v['episodes'] or 0):9d}")
    return "\n".join(lines)


async def evaluate(
    cfg: EvalConfig, out_dir: Path, on_trajectory: Any = None, keep_screenshots: bool = False
) -> dict[str, Any]:
    """Runs the task pool through the rollout task with the configured policy and scores it; every
    trajectory is also handed to ``on_trajectory`` (collection keeps them). Returns the report."""
    from maigym_ray.rollout import Finished, check_model_settings, run_rollouts
    from maigym_ray.runtime.session import Session

    cfg = replace(cfg, env=env_for_pool(cfg.env, cfg.tasks.pool))  # a suite's tasks run on its backend kind
    validate_manager_config(cfg.env)
    check_model_settings(cfg.policy)  # an unknown policy.kind lists the registered ones
    session = Session(cfg.ray, cfg.env, cfg.policy, cfg.topology)  # an impossible topology fails here
    # The synthesis stage first (in a thread: it runs its own event loop and EnvManager), then loading.
    tasks_cfg = await asyncio.to_thread(synthesis_stage, cfg.tasks, out_dir, cfg.ray, cfg.topology)
    platforms = sorted({p.platform for p in cfg.env.pools.values()})
    tasks, notes = route_tasks(tasks_cfg, platforms)
    for note in notes:  # before the run: what runs where, and what does not
        print(f"eval: {note}", flush=True)
    print(f"eval: {len(tasks)} tasks on {platforms}", flush=True)
    work = [
        (t, plat, e)
        for t in tasks
        for plat in platforms
        if plat in t.platforms
        for e in range(cfg.episodes_per_task)
    ]
    if not work:
        raise ConfigError(f"no task of the pool runs on the configured platforms {platforms}")
    rows: list[dict[str, Any]] = []
    bar = tqdm(total=len(work), desc=f"eval {cfg.policy.kind}", unit="ep", delay=1)

    def finished(f: Finished) -> None:
        if on_trajectory is not None:
            on_trajectory(f.trajectory)
        rows.append(result_row(f.trajectory, f.task, f.platform, f.attempt, f.seconds))
        if rows[-1]["outcome"] == "task_error":  # said as it happens, above the progress bar
            tqdm.write(task_error_lines(rows[-1:])[0])
        bar.update(1)
        scored = [r for r in rows if not r["infra_failed"]]
        bar.set_postfix(success=fmt_rate(rate(sum(r["success"] for r in scored), len(scored))))

    try:
        t0 = time.perf_counter()
        manager, engines = await session.start(tasks)  # engines and envs come up together
        bringup = time.perf_counter() - t0
        t_run = time.perf_counter()
        await run_rollouts(
            manager,
            [(e, t, plat) for t, plat, e in work],
            cfg.policy,
            engines,
            cfg.concurrency,
            cfg.infra_retries,
            cfg.env.step_timeout_s,
            keep_screenshots,
            finished,
            task_options=session.placement.rollout_task(),
        )
        bar.close()
        seconds = time.perf_counter() - t_run
        metrics = await manager.metrics.remote()
        cache = [await e.prefix_cache_stats.remote() for e in engines]
    finally:
        await session.stop()

    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=RESULT_SCHEMA), out_dir / "results.parquet")
    scored = [r for r in rows if _outcome(r) in ("success", "failure")]
    report = {
        "name": cfg.name,
        "policy": cfg.policy.kind,
        "episodes": len(rows),
        "success_rate": rate(sum(r["success"] for r in scored), len(scored)),
        "scored": len(scored),
        "infra_failed": sum(r["outcome"] == "infra_failed" for r in rows),
        "task_errors": sum(r["outcome"] == "task_error" for r in rows),
        "bringup_s": bringup,
        "seconds": seconds,
        "episodes_per_s": len(rows) / seconds if seconds else 0.0,
        "by_platform": {
            p: rate(
                sum(r["success"] for r in scored if r["platform"] == p),
                sum(1 for r in scored if r["platform"] == p),
            )
            for p in platforms
        },
        "by_split": split_success(rows),
        "prefix_cache_hit_rate": (sum(c["hits"] for c in cache) / max(1.0, sum(c["queries"] for c in cache)))
        if cache
        else None,
        "env_metrics": {
            "counters": metrics["counters"],
            "latency_p50_s": {k: v["p50_s"] for k, v in metrics["latency"].items()},
        },
    }
    atomic_write_text(out_dir / "report.json", json.dumps(report, indent=2))  # whole or absent, after a crash
    table = success_table(rows) + "\n\n" + split_table(rows)
    errors = task_error_lines(rows)
    if errors:  # the reason, on the console: a broken task is the author's to fix, not a 0 to puzzle over
        table += "\n\n" + "\n".join(errors)
    (out_dir / "success_table.txt").write_text(table + "\n")
    print(table)
    _log_wandb(cfg, out_dir, report, rows)
    return report


def _log_wandb(cfg: EvalConfig, out_dir: Path, report: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    if cfg.wandb.mode == "disabled":
        return
    import wandb

    run = wandb.init(
        project=cfg.wandb.project,
        name=cfg.name,
        mode=cfg.wandb.mode,
        dir=str(out_dir),
        config=asdict(cfg),
        reinit="finish_previous",
    )
    run.log({k: v for k, v in report.items() if isinstance(v, int | float)})
    run.log(
        {"episodes": wandb.Table(columns=list(rows[0]), data=[list(r.values()) for r in rows])}
        if rows
        else {}
    )
    run.finish()
