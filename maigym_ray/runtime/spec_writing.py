"""The spec writer as a stage (``cli.synth`` with ``spec_writer.descriptions`` set): a policy's model drafts app
specs, :mod:`maigym_ray.synth.spec_writer` checks them, and the drafts' derived tasks are validated live.

The model comes from the policy-kind registry (``rollout.text_client``): kind ``engine`` starts the run's vLLM
engine actors (or uses the ``engines`` a caller passes, e.g. ScriptedEngine actors in tests), kind ``openai``
asks a server. The engines are stopped before validation starts, so the model and the browsers never hold the
node's CPUs at once. Validation is the synthesis path (:func:`~maigym_ray.runtime.synthesis.validate_live`)
with the drafts' spec files as the pool's apps, so every env actor registers them itself.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from maigym_ray.apps.registry import APP_CLASSES
from maigym_ray.durable import atomic_write_text
from maigym_ray.rollout import check_model_settings, policy_kind, policy_options, text_client
from maigym_ray.runtime.schema import SynthConfig
from maigym_ray.runtime.synthesis import validate_live
from maigym_ray.synth.spec_writer import STAGES, SpecWriter, Validate
from maigym_ray.types import TaskSpec


def live_validator(cfg: SynthConfig) -> Validate:
    """Validation of drafts' tasks on a fresh EnvManager whose web pool hosts exactly the drafts' apps."""

    async def validate(tasks: list[TaskSpec], files: list[Path]) -> list[Any]:
        vcfg = replace(cfg, env=replace(cfg.env, apps=[str(f) for f in files]))
        verdicts, _ = await validate_live(vcfg, tasks, desc="validate drafts")
        return verdicts

    return validate


async def write_specs(
    cfg: SynthConfig, out_dir: Path, engines: list[Any] | None = None, validate: Validate | None = None
) -> dict[str, Any]:
    """Drafts ``cfg.spec_writer.attempts`` specs per description and keeps the ones through every gate; returns
    the report (also ``out_dir/spec_writer_report.json``). ``validate`` defaults to :func:`live_validator`."""
    from maigym_ray.runtime.session import Session

    sw = cfg.spec_writer
    check_model_settings(sw.policy)  # a bad kind or chat format fails here, before any engine starts
    session = None
    if engines is None and policy_kind(sw.policy.kind).engines:
        session = Session(cfg.ray, cfg.env, policy=sw.policy, topology=cfg.topology)
        engines = await asyncio.to_thread(session.start_engines)
    live = validate or live_validator(cfg)

    async def stop_engines_then_validate(tasks: list[TaskSpec], files: list[Path]) -> list[Any]:
        nonlocal session
        if session is not None:
            await session.stop()
            session = None
        return await live(tasks, files)

    t0 = time.perf_counter()
    try:
        ask = text_client(sw.policy, engines)
        writer = SpecWriter(ask, out_dir, set(APP_CLASSES), sw.max_tasks, sw.concurrency)
        _, report = await writer.run(sw.descriptions, sw.attempts, stop_engines_then_validate)
    finally:
        if session is not None:
            await session.stop()
    report["model"] = getattr(policy_options(sw.policy), "model", "") or sw.policy.engine.model
    report["policy_kind"] = sw.policy.kind
    report["seconds"] = round(time.perf_counter() - t0, 1)
    atomic_write_text(out_dir / "spec_writer_report.json", json.dumps(report, indent=2))
    return report


def print_spec_report(report: dict[str, Any], out_dir: Path) -> None:
    """Drafts through each gate, the rejections by reason and the kept apps."""
    print(f"spec writer: {report['drafts']} drafts by {report['model']} ({report['policy_kind']})")
    for stage in STAGES:
        print(f"  passed {stage:12s} {report['passed'][stage]}")
    print(f"kept {report['kept']}: {', '.join(report['kept_apps']) or '-'}")
    for reason, n in sorted(report["rejected_by_reason"].items(), key=lambda kv: -kv[1]):
        print(f"  rejected {reason:24s} {n}")
    print(f"drafts, rejections and kept specs: {out_dir}")
