"""MiniWoB++ pool specs, the page_reward verifier and the scripted solvers' reading of observations."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("miniwob")

from maigym_ray.errors import ConfigError, TaskError
from maigym_ray.suites.miniwob import load_pool_spec, task_names
from maigym_ray.suites.miniwob_solutions import SOLVERS, MiniwobScriptedPolicy, instruction
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.tasks.verifiers import run_verifier
from maigym_ray.types import Element, Observation

pytestmark = pytest.mark.unit


def test_pool_specs_load_any_shipped_task():
    names = task_names()
    assert len(names) > 100 and "click-button" in names and "book-flight" in names
    assert len(load_pool_spec("miniwob:all")) == len(names)
    tasks = load_pool_spec("miniwob:click-button,enter-text@3")
    # seed-major: any first K tasks (driver.sft.tasks) cover every named task
    assert [t.id for t in tasks] == [
        f"miniwob.{n}.{s}" for s in range(3) for n in ("click-button", "enter-text")
    ]
    assert tasks[3].initial_state == {"miniwob": {"task": "enter-text", "seed": 1}}
    # through the task loader: tasks.pool=miniwob:... resolves here with no file
    assert [t.id for t in TaskPool.load("miniwob:click-test")] == ["miniwob.click-test.0"]
    with pytest.raises(TaskError, match="click-buton"):
        load_pool_spec("miniwob:click-buton")
    with pytest.raises(ConfigError):
        load_pool_spec("miniwob:click-button@x")


def test_a_pool_spec_with_held_out_seeds_splits_them_off():
    tasks = load_pool_spec("miniwob:click-button,enter-text@3+2")
    train = [t.id for t in tasks if t.split == "train"]
    test = [t.id for t in tasks if t.split == "test"]
    assert train == [f"miniwob.{n}.{s}" for s in range(3) for n in ("click-button", "enter-text")]
    assert test == [f"miniwob.{n}.{s}" for s in (3, 4) for n in ("click-button", "enter-text")]
    assert {t.split for t in load_pool_spec("miniwob:click-button@3")} == {"train"}
    for bad in ("miniwob:click-button@3+", "miniwob:click-button@3+0", "miniwob:click-button@0+2"):
        with pytest.raises(ConfigError, match="seed"):
            load_pool_spec(bad)


def test_page_reward_is_the_pages_raw_reward_clipped():
    spec = {"name": "page_reward", "params": {"suite": "miniwob"}}

    def page(done: bool, raw: float) -> dict:
        return {"miniwob": {"done": done, "raw_reward": raw, "reward": raw * 0.7, "reason": None}}

    assert run_verifier(spec, page(True, 1.0), None).value == 1.0
    partial = run_verifier(spec, page(True, 0.4), None)
    assert partial.value == pytest.approx(0.4) and partial.success
    lost = run_verifier(spec, page(True, -1.0), None)
    assert lost.value == 0.0 and not lost.success
    assert run_verifier(spec, page(False, 1.0), None).value == 0.0  # an unfinished page pays nothing
    with pytest.raises(TaskError, match="miniwob"):
        run_verifier(spec, {"notes": {}}, None)


def _obs(utt: str, *elements: Element) -> Observation:
    lines = [f'instruction "{utt}"'] + [f'[{e.id}] {e.role} "{e.name}"' for e in elements]
    return Observation("web", b"", 380, 220, "\n".join(lines), elements=elements)


def _el(i: str, role: str, name: str) -> Element:
    return Element(i, role, name, 10, 10, 20, 10)


def test_solvers_act_on_what_the_observation_shows():
    from maigym_ray.suites.miniwob import miniwob_task

    policy = MiniwobScriptedPolicy()
    obs = _obs(
        "Select AU, x2 and click Submit.",
        _el("e1", "checkbox", "AU"),
        _el("e2", "checkbox", "q"),
        _el("e3", "checkbox", "x2"),
        _el("e4", "button", "Submit"),
    )
    assert instruction(obs) == "Select AU, x2 and click Submit."
    task = miniwob_task("click-checkboxes", 0)
    got = [asyncio.run(policy.act(task, obs, i, "ep")) for i in range(3)]
    assert got == ['click(id="e1")', 'click(id="e3")', 'click(id="e4")']
    # a screen the solver does not expect ends the episode as a failure, never an exception
    bad = _obs("Select AU and click Submit.", _el("e1", "checkbox", "zz"))
    assert asyncio.run(policy.act(task, bad, 0, "other")) == 'terminate(status="failure")'
    assert len(SOLVERS) >= 20
