"""OSWorld-format fixtures (examples/osworld_tasks, written for this project) on a real desktop: Xvfb, openbox,
xdotool, the editor and the guest agent. Each task's config steps set the desktop up, its golden actions
solve it and its evaluator's getters and metric then pass; the same task left untouched fails.

One desktop runs every fixture in turn (its reset is about 0.1 s), in this process, through the registry's
``osworld`` builder: what is tested is the importer, the steps, the getters and the metrics, not Ray.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from maigym_ray.actions import parse_action
from maigym_ray.config import PoolConfig
from maigym_ray.envs.registry import build_backend
from maigym_ray.errors import TaskError
from maigym_ray.suites.osworld import OsworldBackend, load_pool_spec, load_task
from maigym_ray.tasks.verifiers import run_verifier

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[2] / "examples" / "osworld_tasks"

_MISSING = [t for t in ("Xvfb", "openbox", "xdotool", "mousepad") if shutil.which(t) is None]
if _MISSING:
    pytest.skip(f"{', '.join(_MISSING)} not installed", allow_module_level=True)


async def test_fixtures_pass_under_golden_and_fail_untouched():
    tasks = load_pool_spec(f"osworld:{FIXTURES}")
    assert len(tasks) >= 4 and all(t.golden for t in tasks)
    pool = PoolConfig(platform="desktop", backend="osworld", options={"screenshot": False})
    backend = build_backend(pool, ["notes"])
    assert isinstance(backend, OsworldBackend)
    try:
        await backend.start()
        for task in tasks:
            await backend.reset(task)
            untouched = run_verifier(task.verifier, await backend.state(), None)
            assert not untouched.success and untouched.value < 1.0, (task.id, untouched)
            await backend.reset(task)
            for g in task.golden:
                error = await backend.act(parse_action(g))
                assert error == "", (task.id, g, error)
            state = await backend.state()
            reward = run_verifier(task.verifier, state, None)
            assert reward.success, (task.id, reward, state["osworld"])
        # a config command that fails is the task's error, not a silent 0
        bad = load_task(
            {
                "id": "bad-setup",
                "instruction": "x",
                "config": [{"type": "execute", "parameters": {"command": "exit 3", "shell": True}}],
                "evaluator": {
                    "func": "exact_match",
                    "result": {"type": "rule", "rules": 1},
                    "expected": {"type": "rule", "rules": {"expected": 1}},
                },
            }
        )
        with pytest.raises(TaskError, match="exited 3"):
            await backend.reset(bad)
    finally:
        await backend.close()
