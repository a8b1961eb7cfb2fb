"""Every config in conf/ composes against its schema and builds; bad names are clear ConfigErrors."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from maigym_ray.config import (
    AndroidBackendConfig,
    DesktopBackendConfig,
    EnvManagerConfig,
    LibvirtProviderConfig,
    PoolConfig,
    validate_manager_config,
)
from maigym_ray.envs.registry import BACKENDS, BackendKind, backend_kind, kind_options, register_backend
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
        assert cfg.policy.kind == "engine" and cfg.tasks.pool.startswith(("families:", "miniwob:"))
    assert isinstance(cfg.env, EnvManagerConfig)
    for name, pool in cfg.env.pools.items():  # each pool's options read into its kind's own settings class
        assert isinstance(pool, PoolConfig)
        cls = backend_kind(pool.backend).options
        assert isinstance(kind_options(pool, name), cls)
        if experiment is None:  # the pools of conf/backends/*.yaml have every setting (their kind's
            # backend_options group), so any can be overridden without a "+"
            assert set(pool.options) == {f.name for f in dataclasses.fields(cls)}
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
    assert kind_options(synth.env.pools["web"]).screenshot is False  # validation needs no screenshots
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
    with pytest.raises(ConfigError, match=r"options\.platform 'web' != platform 'mobile_web'"):
        validate_manager_config(
            EnvManagerConfig(pools={"m": PoolConfig(platform="mobile_web", options={"platform": "web"})})
        )
    with pytest.raises(ConfigError, match="target_size"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(target_size=9, max_size=2)}))
    with pytest.raises(ConfigError, match="browser"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(options={"browser": "x"})}))
    with pytest.raises(ConfigError, match="instances_per_actor"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(instances_per_actor=0)}))
    with pytest.raises(ConfigError, match=r"env\.pools\.w\.options\.reset"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(options={"reset": "x"})}))
    validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(options={"reset": "restart"})}))


def test_a_pools_options_are_its_kinds_typed_settings():
    """One mechanism for every backend kind: the pool holds only its kind's settings, read into the kind's
    class with nested settings typed, and a wrong key or type is a ConfigError naming its key path."""
    desk = PoolConfig(platform="desktop", backend="desktop", options={"libvirt": {"memory_mb": 2048}})
    options = kind_options(desk, "env.pools.desk")
    assert isinstance(options, DesktopBackendConfig) and isinstance(options.libvirt, LibvirtProviderConfig)
    assert options.libvirt.memory_mb == 2048 and options.provider == "xvfb"
    assert isinstance(kind_options(PoolConfig(backend="android", platform="android")), AndroidBackendConfig)
    with pytest.raises(ConfigError, match=r"env\.pools\.w\.options\.browsr: .*takes: platform, width"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(options={"browsr": "shared"})}))
    with pytest.raises(ConfigError, match=r"env\.pools\.w\.options\.width: .*could not be converted"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(options={"width": "wide"})}))
    with pytest.raises(ConfigError, match=r"env\.pools\.d\.options\.libvirt\.memory: "):
        validate_manager_config(
            EnvManagerConfig(
                pools={"d": PoolConfig("desktop", "desktop", options={"libvirt": {"memory": 1}})}
            )
        )
    # a web pool's settings are not a desktop's
    with pytest.raises(ConfigError, match=r"options\.provider: .*backend 'web'"):
        validate_manager_config(EnvManagerConfig(pools={"w": PoolConfig(options={"provider": "xvfb"})}))


def test_a_plugin_kinds_check_gets_its_typed_settings():
    @dataclasses.dataclass
    class Lamp:
        brightness: int = 1

    seen = []

    def check(pool, options, where):
        seen.append((options, where))
        if options.brightness > 9:
            raise ConfigError(f"{where}.options.brightness={options.brightness}: need <= 9")

    with BACKENDS.isolated():  # the registration stays in this test
        register_backend("lamp", BackendKind(build=lambda *a: None, check=check, options=Lamp))
        good = PoolConfig(backend="lamp", options={"brightness": 3})
        validate_manager_config(EnvManagerConfig(pools={"l": good}))
        assert seen == [(Lamp(brightness=3), "env.pools.l")]
        with pytest.raises(ConfigError, match=r"env\.pools\.l\.options\.brightness=10"):
            bad = PoolConfig(backend="lamp", options={"brightness": 10})
            validate_manager_config(EnvManagerConfig(pools={"l": bad}))


def test_a_pools_options_are_set_from_the_command_line():
    cfg = _compose("backends=web", "env.pools.web.options.browser=per_env", "env.pools.web.options.width=800")
    options = kind_options(cfg.env.pools["web"])
    assert (options.browser, options.width, options.platform) == ("per_env", 800, "")
    assert (
        "per_env" == kind_options(_compose("env.pools.web.options.browser=per_env").env.pools["web"]).browser
    )
    # conf/backends/*.yaml put the kind's whole typed settings under options: a typo is refused at compose,
    # and one forced in with "+" at validation
    with pytest.raises(ConfigCompositionException, match=r"env\.pools\.web\.options\.brower"):
        _compose("env.pools.web.options.brower=per_env")
    with pytest.raises(ConfigError, match=r"env\.pools\.web\.options\.brower"):
        validate_manager_config(_compose("+env.pools.web.options.brower=per_env").env)


def test_a_policys_options_are_its_kinds_typed_settings():
    """Policy kinds own their settings as backend kinds do: ``policy=openai`` (Hydra group) sets the kind and
    all its settings under ``policy.options``, which ``policy_options`` reads into the kind's class; a typo is
    refused at compose, and one forced in (or options for a kind that takes none) at validation."""
    from maigym_ray.policy.config import OpenAIConfig
    from maigym_ray.rollout import POLICIES, PolicyKind, check_model_settings, policy_options

    cfg = _compose(
        "policy=openai", "policy.options.base_url=http://10.0.0.9:8000/v1", "policy.options.model=m"
    )
    assert cfg.policy.kind == "openai"
    assert policy_options(cfg.policy) == OpenAIConfig(base_url="http://10.0.0.9:8000/v1", model="m")
    assert _compose("policy=random").policy.kind == "random" and _compose().policy.options == {}
    # the synth entry point's writer takes the same group under its own key
    writer = _compose("policy@spec_writer.policy=openai", "spec_writer.policy.options.model=w", name="synth")
    assert policy_options(writer.spec_writer.policy).model == "w"
    with pytest.raises(ConfigCompositionException, match=r"policy\.options\.baseurl"):
        _compose("policy=openai", "policy.options.baseurl=x")
    with pytest.raises(
        ConfigError, match=r"policy\.options\.baseurl: .*policy kind 'openai' takes: base_url"
    ):
        check_model_settings(_compose("policy.kind=openai", "+policy.options.baseurl=x").policy)
    with pytest.raises(ConfigError, match=r"policy\.options: policy kind 'golden' takes no options"):
        check_model_settings(_compose("+policy.options.base_url=x").policy)

    @dataclasses.dataclass
    class Temperature:
        celsius: float = 20.0

    with POLICIES.isolated():  # a plug-in kind's settings are read the same way
        POLICIES.register("thermo", PolicyKind(build=lambda cfg, engines: None, options=Temperature))
        thermo = _compose("policy.kind=thermo", "+policy.options.celsius=30").policy
        assert policy_options(thermo) == Temperature(30.0)
        with pytest.raises(ConfigError, match=r"policy\.options\.celsius: .*could not be converted"):
            policy_options(_compose("policy.kind=thermo", "+policy.options.celsius=hot").policy)


def test_a_trainer_strategys_options_are_its_typed_settings():
    from maigym_ray.rl.strategies import DeepSpeedConfig, strategy_options

    cfg = _compose("trainer_strategy=deepspeed", "topology.trainer.options.zero_stage=1", name="train")
    assert cfg.topology.trainer.strategy == "deepspeed"
    assert strategy_options(cfg.topology.trainer) == DeepSpeedConfig(zero_stage=1)
    assert strategy_options(_compose("topology=gpu_1node", name="train").topology.trainer) == DeepSpeedConfig(
        2
    )
    assert strategy_options(_compose(name="train").topology.trainer) is None  # torch takes none
    with pytest.raises(ConfigCompositionException, match=r"topology\.trainer\.options\.zero"):
        _compose("trainer_strategy=deepspeed", "topology.trainer.options.zero=1", name="train")


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
