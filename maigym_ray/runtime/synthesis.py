"""Synthesis as a stage: seeded worlds -> a validated task pool (``cli/synth.py`` runs it; eval and train run it
explicitly before loading a "synth:" pool, see runtime/pools.py).

worlds -> templates -> planned golden solutions (in-process pre-check) -> [LLM paraphrases] -> live validation
on EnvManager instances in parallel -> ``pool.parquet`` with the ``train``, ``test`` and ``ood_app`` splits.
Also writes ``rejected.jsonl`` (every rejected task with its reason), ``infra_failures.jsonl`` (tasks whose
validation hit an infrastructure failure twice: not judged, not in the pool), ``summary.txt`` (counts by app, template,
tier and split) and ``synth_report.json`` (the figures ``benchmarks/synth.py`` reads), and prints the rejection rate
and the reasons.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from maigym_ray.config import RayConfig, validate_manager_config
from maigym_ray.durable import atomic_write_text
from maigym_ray.envs.lease import LeasedEnv
from maigym_ray.errors import InfraError
from maigym_ray.runtime.schema import SynthConfig
from maigym_ray.runtime.topology import TopologyConfig
from maigym_ray.synth.generate import Rejection, generate, task_tag
from maigym_ray.synth.validation import Verdict, validate_all
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.types import TaskSpec


async def validate_live(
    cfg: SynthConfig, tasks: list[TaskSpec], desc: str = "validate"
) -> tuple[list[Verdict], dict[str, Any]]:
    """Validates ``tasks`` on a fresh EnvManager (web pool); returns the verdicts and the manager's metrics."""
    from maigym_ray.runtime.session import Session

    validate_manager_config(cfg.env)
    session = Session(cfg.ray, cfg.env, topology=cfg.topology)
    manager = await session.start_envs()
    try:
        verdicts = await validate_on(manager, tasks, cfg.concurrency, cfg.infra_retries, desc)
        metrics = await manager.metrics.remote()
    finally:
        await session.stop()
    return verdicts, metrics


async def validate_on(
    manager: Any, tasks: list[TaskSpec], concurrency: int, retries: int = 1, desc: str = "validate"
) -> list[Verdict]:
    """Validates ``tasks`` on web instances leased from a running EnvManager; returns the verdicts."""
    bar = tqdm(total=len(tasks), desc=desc, unit="task")
    ok = 0

    async def lease() -> LeasedEnv:
        return await LeasedEnv.acquire(manager, "web")

    async def release(env: LeasedEnv, broken: bool) -> None:
        await env.release(broken)

    def seen(v: Verdict) -> None:
        nonlocal ok
        ok += v.ok
        bar.update(1)
        bar.set_postfix(valid=f"{ok}/{bar.n}")

    try:
        return await validate_all(tasks, lease, release, concurrency, retries, seen)
    finally:
        bar.close()


def summary_table(tasks: list[TaskSpec]) -> str:
    """Counts by app, template, tier and split."""

    lines = []
    splits = sorted({t.split for t in tasks})
    for title, key in (("app", None), ("template", "template"), ("tier", "tier")):
        counts: Counter[tuple[str, str]] = Counter()
        for t in tasks:
            for k in t.apps if key is None else (task_tag(t, key),):
                counts[(k, t.split)] += 1
        names = sorted({k for k, _ in counts})
        lines.append(f"{title:22s} " + " ".join(f"{s:>8s}" for s in splits) + f" {'all':>8s}")
        for n in names:
            row = [counts[(n, s)] for s in splits]
            lines.append(f"{n:22s} " + " ".join(f"{c:8d}" for c in row) + f" {sum(row):8d}")
        lines.append("")
    lines.append(f"{'total':22s} " + " ".join(f"{sum(t.split == s for t in tasks):8d}" for s in splits))
    return "\n".join(lines)


def write_pool(
    out_dir: Path,
    tasks: list[TaskSpec],
    rejected: list[Rejection],
    report: dict[str, Any],
    pool_name: str = "pool.parquet",
) -> Path:
    """Writes the pool, the rejections, the summary table and the report; returns the pool's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pool_path = out_dir / pool_name
    TaskPool(tasks).save(pool_path)
    with (out_dir / "rejected.jsonl").open("w") as f:
        for r in rejected:
            f.write(json.dumps(asdict(r)) + "\n")
    (out_dir / "summary.txt").write_text(summary_table(tasks) + "\n")
    atomic_write_text(out_dir / "synth_report.json", json.dumps(report, indent=2))
    return pool_path


async def _llm_assist(
    cfg: SynthConfig, candidates: list[TaskSpec], seeds: list[int]
) -> tuple[list[TaskSpec], list[Rejection]]:
    """Paraphrases of train tasks and LLM-written tasks (pre-checked here, validated live with the rest)."""
    import os

    from maigym_ray.apps.registry import APP_CLASSES, NOVEL_APPS
    from maigym_ray.synth.generate import draft_to_task
    from maigym_ray.synth.llm import LLMParaphraser, LLMTaskWriter
    from maigym_ray.synth.world import make_world

    para = LLMParaphraser(
        cfg.llm.base_url,
        cfg.llm.model,
        os.environ.get(cfg.llm.api_key_env, "") if cfg.llm.api_key_env else "",
        cfg.llm.paraphrases,
        cfg.llm.timeout_s,
    )
    extra, rejected = await para.paraphrase_all(
        [t for t in candidates if t.split == "train"][: cfg.llm.max_tasks]
    )
    if cfg.llm.tasks_per_world > 0:
        writer = LLMTaskWriter(para, sorted(set(APP_CLASSES) - set(NOVEL_APPS)), cfg.llm.tasks_per_world)
        for seed in seeds[: cfg.llm.task_worlds]:
            world = make_world(seed)
            drafts, bad = await writer.drafts(world)
            rejected += bad
            for k, d in enumerate(drafts):
                out = draft_to_task(d, world, k, cfg.test_every)
                (extra if isinstance(out, TaskSpec) else rejected).append(out)  # type: ignore[arg-type]
    return extra, rejected


async def synthesize(cfg: SynthConfig, out_dir: Path, world_seeds: list[int] | None = None) -> dict[str, Any]:
    """The whole pipeline; returns the report (also written to ``out_dir/synth_report.json``)."""
    t0 = time.perf_counter()
    seeds = (
        world_seeds if world_seeds is not None else list(range(cfg.first_world, cfg.first_world + cfg.worlds))
    )
    candidates, rejected = generate(
        tqdm(seeds, desc="worlds", unit="world"), cfg.templates or None, cfg.test_every
    )
    t_gen = time.perf_counter() - t0
    if cfg.llm.base_url:
        extra, errors = await _llm_assist(cfg, candidates, seeds)
        candidates += extra
        rejected += errors
    steps: list[float] = []
    if cfg.validate and candidates:
        verdicts, _ = await validate_live(cfg, candidates)
        steps = [s for v in verdicts for s in v.step_seconds]
        by_id = {v.task_id: v for v in verdicts}
        valid = [t for t in candidates if by_id[t.id].ok]
        infra = [by_id[t.id] for t in candidates if by_id[t.id].reason == "infra_failure"]
        rejected += [
            Rejection(t.id, task_tag(t, "template"), by_id[t.id].reason, by_id[t.id].detail)
            for t in candidates
            if not by_id[t.id].ok and by_id[t.id].reason != "infra_failure"
        ]
    else:
        valid, infra = candidates, []
        valid = [replace(t, tags=(*t.tags, "unvalidated")) for t in valid] if not cfg.validate else valid
    seconds = time.perf_counter() - t0
    apps = sorted({a for t in valid for a in t.apps})
    total = len(valid) + len(rejected)
    report = {
        "name": cfg.name,
        "worlds": len(seeds),
        "tasks_validated": len(valid) if cfg.validate else 0,
        "tasks": len(valid),
        "validated_live": cfg.validate,
        "apps": len(apps),
        "app_names": apps,
        "cross_app_share": sum("cross_app" in t.tags for t in valid) / max(1, len(valid)),
        "by_split": dict(Counter(t.split for t in valid)),
        "templates": len({t.tags[0] for t in valid}),
        "rejected": len(rejected),
        "rejection_rate": len(rejected) / max(1, total),
        "rejected_by_reason": dict(Counter(r.reason for r in rejected)),
        "infra_failures": len(infra),
        "generate_s": t_gen,
        "seconds": seconds,
        "validate_step_p50_s": statistics.median(steps) if steps else None,
    }
    write_pool(out_dir, valid, rejected, report)
    with (out_dir / "infra_failures.jsonl").open("w") as f:  # not rejections: the task was never judged
        for v in infra:
            f.write(json.dumps(asdict(v)) + "\n")
    return report


def synthesized_pool(
    templates: list[str],
    worlds: int,
    out_dir: Path,
    ray_cfg: RayConfig,
    topology: TopologyConfig | None = None,
) -> TaskPool:
    """A pool synthesised (and validated live) into ``out_dir``; an existing ``out_dir/pool.parquet`` from the
    same templates and worlds (a resumed run) is loaded instead."""
    path, key = out_dir / "pool.parquet", out_dir / "request.json"
    request = json.dumps({"templates": templates, "worlds": worlds})
    if path.exists() and key.exists() and key.read_text() == request:
        return TaskPool.load(path)
    cfg = SynthConfig(ray=ray_cfg, worlds=worlds, templates=templates, name="synth-for-run")
    if topology is not None:
        cfg.topology = topology
    report = asyncio.run(synthesize(cfg, out_dir))
    if report["infra_failures"]:
        raise InfraError(f"{report['infra_failures']} tasks hit infrastructure failures during validation")
    print(f"synthesised pool: {report['tasks']} tasks {report['by_split']}, rejected {report['rejected']}")
    key.write_text(request)
    return TaskPool.load(path)


def print_report(report: dict[str, Any], out_dir: Path) -> None:
    """The closing lines: counts, rejection rate and reasons."""
    print((out_dir / "summary.txt").read_text())
    print(
        f"tasks={report['tasks']} validated={report['tasks_validated']} apps={report['apps']} "
        f"cross_app_share={report['cross_app_share']:.2f} splits={report['by_split']} "
        f"seconds={report['seconds']:.0f}"
    )
    print(f"rejection rate {report['rejection_rate']:.3f} ({report['rejected']} tasks); reasons:")
    for reason, n in sorted(report["rejected_by_reason"].items(), key=lambda kv: -kv[1]):
        print(f"  {reason:32s} {n}")
    if report["infra_failures"]:
        print(f"infrastructure failures (not rejections, not in the pool): {report['infra_failures']}")
    print(f"pool: {out_dir / 'pool.parquet'}")
