"""The one plug-in mechanism (maigym_ray/plugins.py): a throwaway package, put on sys.path with its own
dist-info and no edit to maigym_ray/, adds a policy kind and a backend kind through entry points, and an
episode runs on both; every kind's package-declared entry points resolve; unknown names list the registered."""

from __future__ import annotations

import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from maigym_ray import plugins
from maigym_ray.apps.registry import APP_CLASSES
from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig, validate_manager_config
from maigym_ray.envs.actor import EnvActor
from maigym_ray.envs.desktop.provider import DESKTOP_PROVIDERS
from maigym_ray.envs.registry import BACKENDS
from maigym_ray.errors import ConfigError
from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.prompt import CHAT_FORMATS
from maigym_ray.rl.strategies import TRAINER_STRATEGIES
from maigym_ray.rollout import GOLDEN_SCRIPTS, POLICIES, make_policy
from maigym_ray.tasks.pool import POOL_SOURCES
from maigym_ray.tasks.verifiers import VERIFIERS
from maigym_ray.types import TaskSpec

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
REGISTRIES = [
    BACKENDS,
    POLICIES,
    TRAINER_STRATEGIES,
    POOL_SOURCES,
    CHAT_FORMATS,
    VERIFIERS,
    APP_CLASSES,
    DESKTOP_PROVIDERS,
    GOLDEN_SCRIPTS,
]

PLUGIN = '''
from maigym_ray.envs.backend import Backend
from maigym_ray.types import Element, Observation


class Lamp(Backend):
    """One switch; ``click`` toggles the lamp."""

    platform = "web"

    def __init__(self, platform):
        self.platform, self.on, self.alive = platform, False, False

    async def start(self):
        self.alive = True

    async def reset(self, task):
        self.on = False

    async def observe(self):
        label = "Lamp on" if self.on else "Lamp off"
        return Observation(platform=self.platform, screenshot=b"", width=100, height=40, a11y=f'[1] button "{label}"',
                           elements=(Element("1", "button", label, 50, 20, 80, 30),))

    async def act(self, action):
        self.on = not self.on if action.name == "click" else self.on
        return ""

    async def state(self):
        return {"lamp": {"on": self.on}}

    async def health(self):
        return self.alive

    async def close(self):
        self.alive = False


def build_lamp(pool, apps, app_bind="127.0.0.1", node=None):
    return Lamp(pool.platform)


class SwitchOn:
    """Clicks the switch once, then says it is done."""

    async def act(self, task, observation, step, episode_id=""):
        return 'click(id="1")' if step == 0 else 'terminate(status="success")'


def build_switch_on(cfg, engines):
    return SwitchOn()
'''

TASK = TaskSpec(
    id="lamp-on",
    instruction="Turn the lamp on.",
    apps=("notes",),
    verifier={
        "name": "checks",
        "params": {"checks": [{"op": "exists", "app": "lamp", "path": "", "match": {"on": True}}]},
    },
)


@pytest.fixture
def throwaway_package(tmp_path, monkeypatch):
    """A package installed the way pip lays one out: its module and a dist-info whose entry_points.txt
    declares a policy kind and a backend kind. Nothing under maigym_ray/ names it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "lamp_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "lamp_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lamp-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[maigym_ray.policies]\nswitch_on = lamp_plugin:build_switch_on\n\n"
        "[maigym_ray.backends]\nlamp = lamp_plugin:build_lamp\n"
    )
    with POLICIES.isolated(), BACKENDS.isolated():  # entered first: what is scanned from site/ is undone
        monkeypatch.syspath_prepend(str(site))
        yield
    sys.modules.pop("lamp_plugin", None)


async def test_a_package_adds_a_policy_kind_and_a_backend_kind_through_entry_points(throwaway_package):
    assert "switch_on" in POLICIES.names() and "lamp" in BACKENDS.names()
    pool = PoolConfig(backend="lamp")
    validate_manager_config(EnvManagerConfig(pools={"lamp": pool}, apps=["notes"]))
    actor = EnvActor()
    await actor.start("lamp-0", pool, [])

    traj = await run_episode(actor, TASK, make_policy(PolicyConfig(kind="switch_on")))
    await actor.close()
    assert traj.outcome == "success" and traj.reward.value == 1.0
    assert [t.action.name for t in traj.turns] == ["click", "terminate"]


def test_without_the_package_the_kinds_are_unknown_and_the_error_lists_the_registered():
    with pytest.raises(
        ConfigError, match=r"policy.kind 'switch_on' is not registered; registered: golden, random"
    ):
        make_policy(PolicyConfig(kind="switch_on"))
    with pytest.raises(
        ConfigError, match=r"backend 'lamp' is not registered; registered: web, android, desktop"
    ):
        validate_manager_config(EnvManagerConfig(pools={"x": PoolConfig(backend="lamp")}))


def test_two_packages_claiming_one_name_is_a_config_error(throwaway_package):
    with pytest.raises(ConfigError, match="taken"):
        POLICIES.register("golden", "lamp_plugin:build_switch_on")
    POLICIES.register("number", 42)
    with pytest.raises(ConfigError, match="is a int, not a PolicyKind or a builder"):
        POLICIES.load("number")


def test_every_entry_point_the_package_declares_resolves_and_is_registered():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    groups = {r.group: r for r in REGISTRIES}
    assert set(declared) == set(groups), "every entry-point group is a registry, and every registry a group"
    for group, entries in declared.items():
        reg = groups[group]
        assert list(entries) == reg.names()[: len(entries)], group  # the package's own, in declared order
        for name in entries:
            reg.load(name)  # imports and passes the kind's check


def test_the_checkout_s_pyproject_wins_over_an_installed_copy_s_metadata():
    # an editable install's metadata is as old as its last pip install (here it may list only the fake): the
    # checkout's pyproject.toml is what counts, and nothing is listed twice
    names = [n for n, _, _ in plugins.declared("maigym_ray.backends")]
    assert names == ["web", "android", "desktop", "miniwob", "osworld", "fake"]
