"""User apps registered by class path (env.apps) without editing the package; errors name the problem."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from maigym_ray.apps.registry import APP_CLASSES, make_apps, register_app
from maigym_ray.config import EnvManagerConfig, validate_manager_config
from maigym_ray.errors import ConfigError

pytestmark = pytest.mark.unit
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tally_app"


@pytest.fixture
def tally_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    with APP_CLASSES.isolated():  # the registration stays in the test
        yield
    sys.modules.pop("maigym_tally.app", None)


def test_a_class_path_in_env_apps_registers_the_app(tally_on_path):
    validate_manager_config(EnvManagerConfig(apps=["notes", "maigym_tally.app:TallyApp"]))
    apps = make_apps(["all", "maigym_tally.app:TallyApp"])
    assert "tally" in apps and "notes" in apps and "mail" in apps
    tally = apps["tally"]
    tally.routes()[1].handler(None)  # plus one
    assert tally.state() == {"counter": {"value": 1}}
    tally.reset()
    assert tally.state() == {"counter": {"value": 0}}


def test_bad_class_paths_are_config_errors(tally_on_path):
    with pytest.raises(ConfigError, match="cannot import"):
        register_app("maigym_tally.nope:TallyApp")
    with pytest.raises(ConfigError, match="not a subclass"):
        register_app("maigym_ray.config:PoolConfig")
    import maigym_tally.app as mod

    clash = type("NotesClash", (mod.TallyApp,), {"name": "notes"})
    with pytest.raises(ConfigError, match="taken"):
        register_app(clash)
    with pytest.raises(ConfigError, match="unknown app"):
        validate_manager_config(EnvManagerConfig(apps=["notes", "no_such_app"]))
