"""Live validation of synthesised tasks: real Chromium instances behind the EnvManager on a local Ray.

One validation run covers a task of every template plus planted bad tasks; each must get the right verdict.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from maigym_ray.config import RayConfig
from maigym_ray.runtime.schema import SynthConfig
from maigym_ray.runtime.synthesis import validate_live
from maigym_ray.synth.generate import generate
from maigym_ray.synth.templates import DEFAULT_TEMPLATES
from maigym_ray.tasks.pool import TaskPool

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


def test_validation_ran_through_the_manager_with_steps_on_the_data_plane(verdicts) -> None:
    by_id, _, metrics = verdicts
    lat = metrics["latency"]
    assert lat["reset"]["count"] >= len(by_id)  # each task reset at least once (twice when it passes)
    assert lat["evaluate"]["count"] >= len(by_id)
    # a leased env steps its instance's actor directly, so the manager sees no step, and the validator times them
    assert "step" not in lat
    passed = [v for v in by_id.values() if v.ok]
    assert passed and all(len(v.step_seconds) >= 1 and min(v.step_seconds) > 0 for v in passed)


def test_llm_made_tasks_enter_the_pool_only_through_live_validation(ray_local, tmp_path) -> None:
    """``cli.synth`` with an LLM endpoint (a local server speaking the chat-completions protocol): paraphrases
    and LLM-written tasks are validated live with the rest, and a proposal that does not parse never enters."""
    import json
    import threading

    from aiohttp import web

    from maigym_ray.runtime.synthesis import synthesize
    from maigym_ray.synth.llm import EXAMPLE_TASK

    task = EXAMPLE_TASK

    async def chat(request: web.Request) -> web.Response:
        prompt = (await request.json())["messages"][0]["content"]
        if "You write tasks" in prompt:
            content = json.dumps(task) + "\n" + json.dumps({**task, "plan": "click everything"})
        else:
            content = "Please " + prompt.split("Instruction: ", 1)[1]  # keeps every fact
        return web.json_response({"choices": [{"message": {"content": content}}]})

    ready = threading.Event()
    box: dict = {}

    def serve() -> None:
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        box["port"], box["loop"] = site._server.sockets[0].getsockname()[1], loop
        ready.set()
        loop.run_forever()

    threading.Thread(target=serve, daemon=True).start()
    assert ready.wait(10)
    cfg = SynthConfig(ray=RayConfig(num_cpus=2), worlds=2, templates=["notes_pin"], concurrency=2)
    cfg.env.pools["web"].target_size = 2
    cfg.llm.base_url = f"http://127.0.0.1:{box['port']}/v1"
    cfg.llm.model = "m"
    cfg.llm.tasks_per_world = 2
    cfg.llm.task_worlds = 1
    try:
        report = asyncio.run(synthesize(cfg, tmp_path))
    finally:
        box["loop"].call_soon_threadsafe(box["loop"].stop)
    pool = list(TaskPool.load(tmp_path / "pool.parquet"))
    written = [t for t in pool if "llm_written" in t.tags]
    paraphrased = [t for t in pool if "llm_paraphrase" in t.tags]
    assert (
        len(written) == 1 and written[0].verifier["name"] == "checks"
    )  # the model's verifier is data (checks), validated live
    assert len(paraphrased) == 1 and paraphrased[0].instruction.startswith("Please ")
    assert report["tasks_validated"] == len(pool) == 4  # 2 template tasks + 1 paraphrase + 1 LLM-written
    assert report["rejected_by_reason"] == {"llm_bad_proposal": 1}
