"""The backend registry: a user's backend (examples/counter_backend, the docs' example) is added by class
path or by name, runs through the EnvActor like a built-in one, and unknown kinds fail with the choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from maigym_ray.config import EnvManagerConfig, PoolConfig, validate_manager_config
from maigym_ray.envs import registry
from maigym_ray.envs.actor import EnvActor
from maigym_ray.errors import ConfigError
from maigym_ray.types import TaskSpec

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "counter_backend"

TASK = TaskSpec(
    id="count-to-3",
    instruction="Click the button until it shows 3.",
    apps=("counter",),
    initial_state={"counter": {"start": 1}},
    verifier={
        "name": "checks",
        "params": {"checks": [{"op": "exists", "app": "counter", "path": "", "match": {"count": 3}}]},
    },
    golden=('click(id="1")', 'click(id="1")'),
)


@pytest.fixture
def example_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    with registry.BACKENDS.isolated():  # registrations stay in this test
        yield


@pytest.mark.parametrize("by", ["class_path", "name"])
async def test_user_backend_runs_through_the_env_actor(example_on_path, by):
    if by == "name":
        registry.register_backend("counter", "counter_backend:build")
    kind = "counter_backend:build" if by == "class_path" else "counter"
    pool = PoolConfig(backend=kind)
    validate_manager_config(EnvManagerConfig(pools={"c": pool}, apps=["notes"]))
    actor = EnvActor()
    assert (await actor.start("i0", pool, []))["platform"] == "web"
    obs = await actor.reset(TASK)
    assert "Count 1" in obs.a11y
    assert not (await actor.evaluate()).success
    for g in TASK.golden:
        res = await actor.step(g)
        assert res.observation.last_action_error == ""
    assert (await actor.evaluate()).success
    res = await actor.step('scroll(direction="down")')
    assert "does nothing here" in res.observation.last_action_error  # a mistake is an observation
    await actor.close()


def test_unknown_kinds_and_clashes_are_config_errors(example_on_path):
    with pytest.raises(ConfigError, match="registered: web, android, desktop, miniwob, osworld, fake"):
        registry.check_backend("fax")
    with pytest.raises(ConfigError, match="cannot import"):
        registry.check_backend("no_such_module:build")
    with pytest.raises(ConfigError, match="taken"):
        registry.register_backend("web", "counter_backend:build")
    registry.register_backend("web", "maigym_ray.envs.kinds:WEB")  # the same kind again is fine
    from maigym_ray.envs.kinds import WEB

    registry.register_backend("web", WEB)  # and so is the object its entry point names
