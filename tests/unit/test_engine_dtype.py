"""The dtype an engine serves its model in: float32 where bfloat16 would be emulated (a CPU without AVX-512-BF16
or AMX), the tiny models always float32, a configured dtype as given; and the process settings every engine
starts with."""

from __future__ import annotations

import pytest

from maigym_ray.policy.config import EngineConfig
from maigym_ray.policy.engine import engine_dtype, native_bf16

pytestmark = pytest.mark.unit


def cpuinfo(*flags: str) -> str:
    base = "fpu vme sse sse2 avx avx2 fma"
    return f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {base} {' '.join(flags)}\n\nprocessor\t: 1\n"


AVX2_ONLY = cpuinfo()
ZEN4 = cpuinfo("avx512f", "avx512bw", "avx512_bf16", "avx512_vnni")
SAPPHIRE_RAPIDS = cpuinfo("avx512f", "amx_tile", "amx_bf16", "amx_int8")
AVX512_WITHOUT_BF16 = cpuinfo("avx512f", "avx512bw", "avx512_vnni")


@pytest.mark.parametrize(
    ("info", "native"),
    [(AVX2_ONLY, False), (ZEN4, True), (SAPPHIRE_RAPIDS, True), (AVX512_WITHOUT_BF16, False)],
)
def test_native_bf16_reads_the_cpu_flags(info, native):
    assert native_bf16(info) is native


def test_a_pretrained_model_runs_float32_on_a_cpu_that_emulates_bfloat16():
    smol = EngineConfig(model="smollm2-135m")
    assert engine_dtype(smol, on_cpu=True, cpuinfo=AVX2_ONLY) == "float32"
    assert engine_dtype(smol, on_cpu=True, cpuinfo=ZEN4) == "auto"
    assert engine_dtype(smol, on_cpu=True, cpuinfo=SAPPHIRE_RAPIDS) == "auto"
    assert (
        engine_dtype(smol, on_cpu=False, cpuinfo=AVX2_ONLY) == "auto"
    )  # a GPU: the host CPU does not matter


def test_tiny_models_are_float32_and_a_configured_dtype_wins():
    assert engine_dtype(EngineConfig(model="tiny-text"), on_cpu=True, cpuinfo=ZEN4) == "float32"
    assert engine_dtype(EngineConfig(model="tiny-text"), on_cpu=False) == "float32"
    assert engine_dtype(EngineConfig(model="smollm2-135m", dtype="bfloat16"), True, AVX2_ONLY) == "bfloat16"
    assert engine_dtype(EngineConfig(model="tiny-vl", dtype="float16"), True, ZEN4) == "float16"


def test_every_engine_starts_unpinned_with_its_kv_cache_size():
    env = EngineConfig(cpu_kv_cache_gb=3).process_env()
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "3", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    assert EngineConfig(cpu_threads_bind="0-1").process_env()["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"


@pytest.mark.parametrize("bind", ["nobind", "auto", "0-1", "0,2", "0-3|4-7"])
def test_threads_bind_takes_vllms_forms(bind):
    assert EngineConfig(cpu_threads_bind=bind).process_env()["VLLM_CPU_OMP_THREADS_BIND"] == bind


@pytest.mark.parametrize("bind", ["", "none", "0-", "all"])
def test_a_bad_threads_bind_is_a_config_error_naming_the_key(bind):
    from maigym_ray.errors import ConfigError

    with pytest.raises(ConfigError, match=r"policy\.engine\.cpu_threads_bind"):
        EngineConfig(cpu_threads_bind=bind)
