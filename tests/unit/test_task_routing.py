"""Which tasks a run evaluates on its pools' platforms, and what it says before the run (runtime/pools.py
route_tasks; conf/backends/ supplies every pool, so ``backends=desktop`` means desktops only)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from maigym_ray.errors import ConfigError
from maigym_ray.runtime.pools import route_tasks
from maigym_ray.runtime.schema import TasksConfig, register

pytestmark = pytest.mark.unit

CONF = Path(__file__).resolve().parents[2] / "conf"
register()


def test_backends_desktop_composes_to_the_desktop_pool_alone() -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = OmegaConf.to_object(compose(config_name="eval", overrides=["backends=desktop"]))
    assert {n: p.platform for n, p in cfg.env.pools.items()} == {"desktop": "desktop"}


def test_a_desktop_pool_runs_the_desktop_tasks_and_says_what_it_left_out() -> None:
    tasks, notes = route_tasks(TasksConfig(pool="builtin"), ["desktop"])
    assert len(tasks) == 4 and all(t.platforms == ("desktop",) for t in tasks)
    assert len(notes) == 1 and "left out 30 of 34 tasks" in notes[0] and "no pool serves them" in notes[0]
    # each task counted once, by the platforms it runs on: the counts add up to the 30
    assert "(mobile_web or web: 30; " in notes[0]


def test_limit_applies_after_the_platform_filter() -> None:
    tasks, _ = route_tasks(TasksConfig(pool="builtin", limit=2), ["desktop"])
    assert [t.platforms for t in tasks] == [("desktop",), ("desktop",)]


def test_tasks_platforms_filters() -> None:
    tasks, notes = route_tasks(TasksConfig(pool="builtin", platforms=["mobile_web"]), ["web", "mobile_web"])
    assert len(tasks) == 30 and all("mobile_web" in t.platforms for t in tasks)
    assert any("not in tasks.platforms" in n and "desktop: 4" in n for n in notes)


def test_a_chosen_platform_no_pool_serves_is_said() -> None:
    _, notes = route_tasks(TasksConfig(pool="builtin", platforms=["web", "desktop"]), ["web"])
    assert any("['desktop'], which no pool serves" in n and "backends=desktop" in n for n in notes)


def test_pools_that_serve_none_of_the_tasks_are_an_error_naming_the_backend() -> None:
    with pytest.raises(ConfigError, match=r"none of the 4 selected tasks.*backends=desktop"):
        route_tasks(TasksConfig(pool=str(_desktop_file())), ["web"])


def test_an_unknown_platform_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown platform.*'desk'"):
        route_tasks(TasksConfig(pool="builtin", platforms=["desk"]), ["web"])


def _desktop_file() -> Path:
    return Path(__file__).resolve().parents[2] / "maigym_ray" / "tasks" / "builtin" / "desktop.jsonl"
