"""What eval says on the console (runtime/evaluation.py), on real Chromium instances: a task whose verifier
breaks at run is printed with its reason and counted under task_errors, not under infra_failed, and the
table's columns are the report's keys."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, RayConfig
from maigym_ray.runtime.evaluation import evaluate
from maigym_ray.runtime.schema import EvalConfig, TasksConfig, WandbConfig

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def test_a_task_error_is_printed_with_its_reason_and_counted_apart(ray_local, tmp_path, capsys) -> None:
    good = json.loads((FIXTURES / "golden_misses_goal.jsonl").read_text().splitlines()[0])
    typo = json.loads(json.dumps(good))
    typo["id"] = (
        "contacts-add-nina-path-typo"  # loads (a path is state, known only at run), raises at evaluate
    )
    typo["verifier"]["params"]["checks"][0]["path"] = "contact"
    pool = tmp_path / "tasks.jsonl"
    pool.write_text(json.dumps(good) + "\n" + json.dumps(typo) + "\n")
    cfg = EvalConfig(
        ray=RayConfig(num_cpus=2),
        env=EnvManagerConfig(pools={"web": PoolConfig(target_size=1, max_size=1)}),
        tasks=TasksConfig(pool=str(pool)),
        policy=PolicyConfig(kind="golden"),
        wandb=WandbConfig(mode="disabled"),
        concurrency=1,
    )
    report = asyncio.run(evaluate(cfg, tmp_path / "run"))
    out = capsys.readouterr()
    console = out.out + out.err
    assert (report["scored"], report["task_errors"], report["infra_failed"]) == (1, 1, 0)
    assert "task error: contacts-add-nina-path-typo on web: TaskError" in console
    assert "contacts.contact does not exist" in console
    assert "success_rate       scored  task_errors infra_failed" in console
    assert "eval: left out" not in console and "eval: 2 tasks on ['web']" in console
