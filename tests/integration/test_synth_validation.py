"""Live validation of synthesised tasks: real Chromium instances behind the EnvManager on a local Ray.

One validation run covers a task of every template plus planted bad tasks; each must get the right verdict.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from maigym_ray.cli.schema import SynthConfig
from maigym_ray.cli.synth import validate_live
from maigym_ray.config import RayConfig
from maigym_ray.synth.generate import generate
from maigym_ray.synth.templates import DEFAULT_TEMPLATES

pytestmark = pytest.mark.integration

LOOPS = "def verify(states, answer):\n    while True:\n        pass\n"


@pytest.fixture(scope="module")
def verdicts(ray_local):
    tasks, rejected = generate([1])
    assert not rejected
    one_each = list({t.tags[0]: t for t in tasks}.values())
    base = next(t for t in tasks if t.tags[0] == "template:notes_pin")
    planted = [
        # a verifier that already holds on the initial state
        replace(
            base,
            id="planted-wrong-verifier",
            verifier={
                "name": "checks",
                "params": {
                    "checks": [
                        {"op": "absent", "app": "notes", "path": "notes", "match": {"title": "No such note"}}
                    ]
                },
            },
        ),
        # a golden solution that stops one click short of the goal
        replace(base, id="planted-short-golden", golden=base.golden[:-1]),
        # a golden action the screen cannot do
        replace(base, id="planted-bad-action", golden=('click(id="no-such-button")',)),
        # a synthesised verifier that never returns: killed by the sandbox, reported, the run goes on
        replace(
            base,
            id="planted-looping-verifier",
            verifier={"name": "code", "params": {"code": LOOPS, "timeout_s": 1}},
        ),
    ]
    cfg = SynthConfig(ray=RayConfig(num_cpus=2), concurrency=3)
    cfg.env.pools["web"].target_size = 3
    cfg.env.pools["web"].max_size = 3
    out, metrics = asyncio.run(validate_live(cfg, one_each + planted))
    return {v.task_id: v for v in out}, one_each, metrics


def test_every_template_passes_live_validation(verdicts) -> None:
    by_id, one_each, _ = verdicts
    assert len(one_each) == len(DEFAULT_TEMPLATES)
    bad = {t.id: (by_id[t.id].reason, by_id[t.id].detail) for t in one_each if not by_id[t.id].ok}
    assert not bad, bad


def test_planted_bad_tasks_are_rejected_with_their_reason(verdicts) -> None:
    by_id, _, _ = verdicts
    assert by_id["planted-wrong-verifier"].reason == "verifier_passes_initial_state"
    assert by_id["planted-short-golden"].reason == "golden_misses_goal"
    assert by_id["planted-bad-action"].reason == "golden_action_failed"
    assert "no-such-button" in by_id["planted-bad-action"].detail
    looping = by_id["planted-looping-verifier"]
    assert looping.reason == "verifier_error" and "timed out" in looping.detail
    assert looping.seconds < 15


def test_validation_ran_through_the_manager(verdicts) -> None:
    by_id, _, metrics = verdicts
    lat = metrics["latency"]
    assert lat["reset"]["count"] >= len(by_id)  # each task reset at least once (twice when it passes)
    assert lat["step"]["count"] > len(by_id) and lat["evaluate"]["count"] >= len(by_id)
