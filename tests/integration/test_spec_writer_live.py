"""The spec writer end to end on live instances: a ScriptedEngine actor writes a sound draft, the draft's spec
file is hosted by the validation pool's own app servers, and its derived tasks pass live validation on Chromium.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from maigym_ray.apps.spec.loader import load_spec
from maigym_ray.config import PolicyConfig, RayConfig
from maigym_ray.generation import SamplingConfig
from maigym_ray.policy.config import EngineConfig
from maigym_ray.policy.engine import resolve_model
from maigym_ray.rollout import load_tokenizer
from maigym_ray.runtime.schema import SpecWriterConfig, SynthConfig
from maigym_ray.runtime.spec_writing import write_specs
from maigym_ray.testing import ScriptedEngine

pytestmark = pytest.mark.integration


def test_a_sound_draft_is_kept_only_after_live_validation(ray_local, tmp_path) -> None:
    good = (Path(__file__).parents[1] / "fixtures" / "specs" / "plantlog.json").read_text()
    tok = load_tokenizer(resolve_model("tiny-text"))
    engine = (
        ray_local.remote(ScriptedEngine)
        .options(num_cpus=0)
        .remote([tok.encode(good, add_special_tokens=False).ids])
    )
    policy = PolicyConfig(
        kind="engine", engine=EngineConfig(model="tiny-text"), sampling=SamplingConfig(max_tokens=4096)
    )
    cfg = SynthConfig(ray=RayConfig(num_cpus=2), concurrency=2)
    cfg.spec_writer = SpecWriterConfig(["a log of house plants"], 1, max_tasks=3, policy=policy)
    cfg.env.pools["web"].target_size = 2
    cfg.env.pools["web"].max_size = 2

    report = asyncio.run(write_specs(cfg, tmp_path, engines=[engine]))

    assert report["kept"] == 1, json.loads((tmp_path / "spec_drafts.jsonl").read_text().splitlines()[0])
    assert report["passed"] == {"json": 1, "spec": 1, "reach": 1, "tasks": 1, "validation": 1}
    assert 1 <= report["tasks_valid"] <= 3
    app = report["kept_apps"][0]
    assert load_spec(tmp_path / "kept" / f"{app}.json")["name"] == app
