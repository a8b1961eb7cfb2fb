"""Every config in conf/ composes against its schema and builds; bad names are clear ConfigErrors."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from maigym_ray.config import EnvManagerConfig, PoolConfig, WebBackendConfig, validate_manager_config
from maigym_ray.errors import ConfigError
from maigym_ray.runtime.schema import (
    CollectConfig,
    DiagnoseConfig,
    EvalConfig,
    SynthConfig,
    TrainConfig,
    register,
)

pytestmark = pytest.mark.unit

CONF = Path(__file__).resolve().parents[2] / "conf"
register()


ENTRY_POINTS = {"eval": EvalConfig, "collect": CollectConfig, "train": TrainConfig}


def _compose(*overrides: str, name: str = "eval") -> Any:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=name, overrides=list(overrides))
    return OmegaConf.to_object(cfg)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("backends", sorted(p.stem for p in (CONF / "backends").glob("*.yaml")))
@pytest.mark.parametrize("experiment", [None, *sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))])
def test_every_config_composes_and_validates(entry, backends, experiment):
    overrides = [f"backends={backends}"] + ([f"experiment={experiment}"] if experiment else [])
    cfg = _compose(*overrides, name=entry)
    assert type(cfg) is ENTRY_POINTS[entry]
    if isinstance(cfg, TrainConfig):
        cfg.trainer.check()
        assert cfg.policy.kind == "engine" and cfg.tasks.pool.startswith(("families:", "miniwob:"))
    assert isinstance(cfg.env, EnvManagerConfig)
    assert all(
        isinstance(p, PoolConfig) and isinstance(p.web, WebBackendConfig) for p in cfg.env.pools.values()
    )
    validate_manager_config(cfg.env)


def test_an_experiments_training_settings_reach_cli_train_only():
    """conf/train_recipe/NAME.yaml is what ``cli.train experiment=NAME`` adds (trainer and driver keys, which the
    other entry points do not have); every recipe belongs to an experiment."""
    experiments = {p.stem for p in (CONF / "experiment").glob("*.yaml")}
    assert {p.stem for p in (CONF / "train_recipe").glob("*.yaml")} <= experiments
    smol = _compose("experiment=smol", name="train")
    assert smol.trainer.autocast == "bf16" and smol.trainer.token_budget == 2048
    assert smol.policy.engine.model == "smollm2-135m" and smol.tasks.family_ids == "random"
    plain = _compose(name="train")
    assert plain.trainer.trainable_layers == 0 and plain.policy.engine.model == "tiny-text"
    assert _compose("experiment=smol", name="eval").policy.engine.model == "smollm2-135m"


@pytest.mark.parametrize(("entry", "schema"), [("synth", SynthConfig), ("diagnose", DiagnoseConfig)])
def test_synth_and_diagnose_configs_compose(entry, schema):
    cfg = _compose(name=entry)
    assert type(cfg) is schema
    synth = cfg if isinstance(cfg, SynthConfig) else cfg.synth
    validate_manager_config(synth.env)
    assert synth.env.pools["web"].web.screenshot is False  # validation needs no screenshots
    with pytest.raises(Exception, match="not_a_field"):
        _compose("not_a_field=1", name=entry)


def test_unknown_key_is_an_error(tmp_path):
    with pytest.raises(ConfigCompositionException, match="not_a_field"):
        _compose("env.not_a_field=1")
    # a YAML file with a key the schema does not have fails to compose too
    shutil.copytree(CONF, tmp_path / "conf")
    (tmp_path / "conf" / "experiment" / "typo.yaml").write_text(
        "# @package _global_\nenv:\n  helth_interval_s: 3\n"
    )
    with initialize_config_dir(config_dir=str(tmp_path / "conf"), version_base="1.3"):
        with pytest.raises(ConfigCompositionException):
            compose(config_name="eval", overrides=["experiment=typo"])


def test_unknown_backend_lists_choices():
    cfg = EnvManagerConfig(pools={"x": PoolConfig(backend="fax")})
    with pytest.raises(ConfigError, match="registered: web, android, desktop, miniwob, osworld, fake"):
        validate_manager_config(cfg)


def test_unknown_app_lists_valid_apps():
    with pytest.raises(
        ConfigError, match=r"valid apps: .*bank, .*calendar, .*contacts, .*food, .*hotel, .*library, .*mail"
    ):
        validate_manager_config(EnvManagerConfig(apps=["mail", "casino"]))


def test_platform_mismatch_and_sizes():
    with pytest.raises(ConfigError, match=r"web\.platform"):
        validate_manager_config(EnvManagerConfig(pools={"m": PoolConfig(platform="mobile_web")}))
    with pytest.raises(ConfigError, match="target_size"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(target_size=9, max_size=2)}))
    with pytest.raises(ConfigError, match="browser"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(web=WebBackendConfig(browser="x"))}))
    with pytest.raises(ConfigError, match="instances_per_actor"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(instances_per_actor=0)}))
    with pytest.raises(ConfigError, match=r"web\.reset"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(web=WebBackendConfig(reset="x"))}))
    validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(web=WebBackendConfig(reset="restart"))}))


@pytest.mark.parametrize("entry", [*sorted(ENTRY_POINTS), "synth"])
@pytest.mark.parametrize("topology", sorted(p.stem for p in (CONF / "topology").glob("*.yaml")))
def test_every_topology_composes_with_every_entry_point(entry, topology):
    from maigym_ray.runtime.topology import TopologyConfig

    cfg = _compose(f"topology={topology}", name=entry)
    assert isinstance(cfg.topology, TopologyConfig) and cfg.topology.name == topology
    with pytest.raises(ConfigCompositionException, match="not_a_field"):
        _compose(f"topology={topology}", "topology.engines.not_a_field=1", name=entry)


def test_default_topology_is_local():
    for entry in [*ENTRY_POINTS, "synth"]:
        assert _compose(name=entry).topology.name == "local"
