"""EngineActor: vLLM's async engine inside a Ray actor, token-in / token-out, with prefix caching on.

``generate`` takes prompt token ids (plus screenshots as PNG bytes) and returns the sampled ids, their
logprobs and how many prompt tokens vLLM served from its prefix cache. The actor also exposes vLLM's own
prefix-cache counters (``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``), read from the engine's
Prometheus registry in this process.

CPU notes (docs/platform-notes.md): the CPU attention backend needs a block size that is a multiple of 32, and prefix
caching hits whole blocks only, so ``block_size=32``. The KV cache is sized with ``VLLM_CPU_KVCACHE_SPACE``
(GiB). Images are downscaled here, the same way every time, because vLLM hashes an image before its own
resizing: identical screens must reach it as identical images. An image prompt carries ONE unexpanded
placeholder per image and vLLM expands it.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from maigym_ray.errors import ConfigError, ContextOverflowError, InfraError, MaigymError
from maigym_ray.generation import Generation, SamplingConfig
from maigym_ray.policy.busy_clock import BusyClock
from maigym_ray.policy.config import EngineConfig


def _tiny(kind: str) -> Callable[[], Path]:
    def build() -> Path:
        from maigym_ray.policy.tiny_models import default_model_dir

        return default_model_dir(kind)

    return build


def _packaged(name: str) -> Callable[[], Path]:
    def convert() -> Path:
        from maigym_ray.policy.gguf_models import model_dir

        return model_dir(name)

    return convert


#: Models users name instead of giving a directory: each builds or converts its directory on first use.
NAMED_MODELS: dict[str, Callable[[], Path]] = {
    "tiny-text": _tiny("text"),
    "tiny-vl": _tiny("vl"),
    "smollm2-135m": _packaged("smollm2-135m"),
}


def resolve_model(model: str) -> str:
    """A model directory for ``model``: a named model's (built or converted on first use), a GGUF file's
    (converted on first use), or ``model`` itself."""
    if model in NAMED_MODELS:
        return str(NAMED_MODELS[model]())
    if model.endswith(".gguf"):
        from maigym_ray.policy.gguf_models import gguf_dir

        return str(gguf_dir(model))
    return model


def model_context(model_dir: str) -> int:
    """The longest sequence the model's config allows (``max_position_embeddings``, of the text model for a
    vision-language one)."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise ConfigError(f"policy.engine.model={model_dir}: no config.json there (not a model directory)")
    cfg = json.loads(path.read_text())
    n = cfg.get("max_position_embeddings") or cfg.get("text_config", {}).get("max_position_embeddings")
    if not n:
        raise ConfigError(f"{path} names no max_position_embeddings: set policy.engine.max_model_len")
    return int(n)


def max_model_len(cfg: EngineConfig, model_dir: str) -> int:
    """``cfg.max_model_len``, or the model's own length at 0; ConfigError when it is above the model's."""
    allowed = model_context(model_dir)
    if cfg.max_model_len > allowed:
        raise ConfigError(
            f"policy.engine.max_model_len={cfg.max_model_len} exceeds what {cfg.model} allows "
            f"({allowed} positions): set it to at most {allowed}, or 0 for the model's own"
        )
    if cfg.max_model_len < 0:
        raise ConfigError(f"policy.engine.max_model_len={cfg.max_model_len}: need >= 0 (0 = the model's)")
    return cfg.max_model_len or allowed


def native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512-BF16 or AMX-BF16 in ``/proc/cpuinfo``'s flags).
    Without either, torch and vLLM emulate bfloat16 with float32 conversions around every op."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = next(
        (line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), []
    )
    return "avx512_bf16" in flags or "amx_bf16" in flags


def engine_dtype(cfg: EngineConfig, on_cpu: bool, cpuinfo: str | None = None) -> str:
    """The dtype the engine serves ``cfg.model`` in: ``cfg.dtype`` when set; else float32 for the tiny models
    (so the engine matches transformers exactly) and on a CPU without native bfloat16 (where vLLM's "auto"
    would serve bfloat16 about 4x slower: 152 s against 36 s in docs/platform-notes.md); else "auto"."""
    if cfg.dtype:
        return cfg.dtype
    if cfg.model.startswith("tiny-") or (on_cpu and not native_bf16(cpuinfo)):
        return "float32"
    return "auto"


def downscale_png(png: bytes, longest_edge: int) -> Any:
    """PNG bytes -> an RGB PIL image whose longest edge is at most ``longest_edge`` (deterministic)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    scale = longest_edge / max(img.size)
    if scale < 1:
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.BICUBIC)
    return img


class EngineActor:
    """One vLLM AsyncLLM. Create with ``ray.remote(EngineActor).options(...)``, then call ``start``."""

    def __init__(self, cfg: EngineConfig, engine_id: int = 0) -> None:
        self.cfg = cfg
        self.engine_id = engine_id
        self.engine: Any = None
        self.version = 0
        self._buffers: list[Any] = []  # weight-broadcast receive buffers
        self.model_dir = ""
        #: the engine's context length (``max_model_len``, resolved against the model at start)
        self.max_len = cfg.max_model_len
        self._cpu = False
        self._vllm_sleep = False  # whether vLLM itself releases memory on sleep (sleep mode on a GPU)
        self.asleep = False
        self._busy = BusyClock()

    async def start(self) -> dict[str, Any]:
        """Starts the engine (about 25 s on CPU); returns the model directory and the start time."""
        if self.engine is not None:
            return {"model": self.model_dir, "start_s": 0.0}
        for key, value in self.cfg.process_env().items():  # for an actor started without the run's env
            os.environ.setdefault(key, value)
        if os.environ.get("ATEN_CPU_CAPABILITY") == "default":
            # On torch's scalar kernel path, inductor's C++ for vLLM's compiled sampler op does not build
            # ("'at::vec' has not been declared"); that op runs eagerly instead (docs/testing.md).
            os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.platforms import current_platform
        from vllm.v1.engine.async_llm import AsyncLLM

        t0 = time.perf_counter()
        self.model_dir = resolve_model(self.cfg.model)
        self.max_len = max_model_len(self.cfg, self.model_dir)
        self._vllm_sleep = self.cfg.sleep_mode and current_platform.is_sleep_mode_available()
        args = AsyncEngineArgs(
            model=self.model_dir,
            tokenizer=self.model_dir,
            enable_prefix_caching=True,
            block_size=self.cfg.block_size,
            max_model_len=self.max_len,
            enforce_eager=self.cfg.enforce_eager,
            max_num_seqs=self.cfg.max_num_seqs,
            seed=self.cfg.seed,
            disable_log_stats=False,
            gpu_memory_utilization=self.cfg.gpu_memory_utilization,
            tensor_parallel_size=self.cfg.tensor_parallel_size,
            dtype=engine_dtype(self.cfg, current_platform.is_cpu()),
            limit_mm_per_prompt={"image": self.cfg.max_images} if self._is_vl() else None,
            skip_mm_profiling=self._is_vl(),
            worker_extension_cls="maigym_ray.policy.weight_receiver.WeightReceiver",
            enable_sleep_mode=self._vllm_sleep,
        )
        self.engine = AsyncLLM.from_engine_args(args)
        # vLLM's CPU sampler crashes the engine on per-request seeds in a batch ("CPU Generator does not use
        # offset"), so on CPU sampling is seeded by the engine seed alone.
        self._cpu = current_platform.is_cpu()
        return {"model": self.model_dir, "start_s": time.perf_counter() - t0, "max_model_len": self.max_len}

    def _is_vl(self) -> bool:
        cfg = json.loads((Path(self.model_dir or resolve_model(self.cfg.model)) / "config.json").read_text())
        return "vision_config" in cfg

    async def generate(
        self, prompt_ids: list[int], images: list[bytes], sampling: SamplingConfig, episode_id: str
    ) -> Generation:
        """Samples a reply to ``prompt_ids`` (with ``images``); returns ids, logprobs and cached-token count."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams
        from vllm.v1.engine.exceptions import EngineDeadError

        self._awake("generate")
        if len(prompt_ids) + sampling.max_tokens > self.max_len:
            raise ContextOverflowError(
                f"prompt of {len(prompt_ids)} tokens + {sampling.max_tokens} to generate exceeds "
                f"max_model_len={self.max_len}"
            )
        params = SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            seed=None if self._cpu else sampling.seed,
            logprobs=0,
            detokenize=False,
            # With a regex the grammar masks the logits before vLLM computes logprobs: they are then the
            # constrained distribution's, not the model's own (the trainer scores them under the same grammar).
            structured_outputs=StructuredOutputsParams(regex=sampling.regex) if sampling.regex else None,
        )
        prompt: dict[str, Any] = {"prompt_token_ids": list(prompt_ids)}
        if images:
            prompt["multi_modal_data"] = {
                "image": [downscale_png(p, self.cfg.image_longest_edge) for p in images]
            }
        # The version the request starts on. A weight load may land while it runs (asynchronous RL loads
        # between engine steps, never draining the engine): its later tokens then come from the newer weights,
        # and their logprobs are the ones they were sampled with, but the turn counts from the oldest weights
        # that contributed, so the staleness bound (rl/staleness.py) is never understated.
        version = self.version
        final = None
        try:
            self._busy.enter()
            async for out in self.engine.generate(
                TokensPrompt(**prompt), params, request_id=f"{episode_id}-{uuid.uuid4().hex[:8]}"
            ):
                final = out
        except EngineDeadError as exc:  # the engine must be restarted: an infrastructure failure, not a 0
            raise InfraError(f"engine {self.engine_id} died: {exc}") from exc
        finally:
            self._busy.leave()
        assert final is not None
        o = final.outputs[0]
        logprobs = tuple(
            float(lp[tok].logprob) for tok, lp in zip(o.token_ids, o.logprobs or [], strict=False)
        )
        return Generation(tuple(o.token_ids), logprobs, int(final.num_cached_tokens or 0), version)

    async def busy_seconds(self) -> float:
        """Seconds so far with at least one request in flight (the driver's engine idle share)."""
        return self._busy.seconds()

    async def update_weights(self, buckets: list[dict[str, Any]], version: int) -> dict[str, int]:
        """Loads new weights (encoded buckets, see weight_receiver.encode_bucket) in place, drops every cached
        prefix (entries made with older weights must never be served) and sets the weights' version."""
        loaded = await self.engine.collective_rpc("load_buckets", args=(buckets,))
        await self.engine.reset_prefix_cache()
        self.version = version
        return {"tensors": int(loaded[0]), "version": version}

    async def join_weight_group(
        self, world_size: int, rank: int, group_name: str, backend: str = "gloo"
    ) -> dict[str, Any]:
        """Joins the trainer's weight-broadcast group (maigym_ray/weights/group.py) as ``rank``."""
        from maigym_ray.weights import group as weight_group

        return await asyncio.to_thread(weight_group.join, world_size, rank, group_name, backend)

    async def receive_weights(
        self, buckets: list[dict[str, Any]], version: int, group_name: str
    ) -> dict[str, float]:
        """Receives a broadcast of new weights (layout ``buckets``) from the trainer, loads them into the vLLM
        worker in place, drops the prefix cache and advances the version. vLLM's CPU workers cannot be Ray
        actors, so the bytes reach the worker through ``collective_rpc`` (docs/platform-notes.md)."""
        from maigym_ray.policy.weight_receiver import encode_bucket
        from maigym_ray.weights import group as weight_group

        self._awake("receive_weights")
        if [(b["numel"], b["dtype"]) for b in buckets] != [
            (t.numel(), str(t.dtype)[6:]) for t in self._buffers
        ]:
            self._buffers = weight_group.receive_buffers(
                buckets, weight_group.device_of(group_name)
            )  # kept: every later sync reuses them
        t0 = time.perf_counter()
        received = await asyncio.to_thread(weight_group.receive, buckets, group_name, self._buffers)
        t1 = time.perf_counter()
        encoded = [encode_bucket([n for n, _ in b], [t for _, t in b]) for b in received]
        out = await self.update_weights(encoded, version)
        return {
            "tensors": float(out["tensors"]),
            "version": float(self.version),
            "receive_s": t1 - t0,
            "load_s": time.perf_counter() - t1,
        }

    # -- colocated mode: the engine and the trainer take turns on the same GPUs --------------------------
    async def sleep(self, level: int = 1) -> dict[str, Any]:
        """Releases the engine's GPU memory while the trainer runs (colocated mode): level 1 moves the weights
        to host memory and drops the KV cache, level 2 drops both (the next weight sync refills them). With
        vLLM's sleep mode off (on CPU) nothing is released, but the engine refuses work until ``wake_up``, so
        a rollout or a weight sync that overlaps the train step fails loudly instead of racing it."""
        if not self.asleep:
            if self._vllm_sleep:
                await self.engine.sleep(level)
            self.asleep = True
        return {"asleep": True, "released": self._vllm_sleep, "level": level}

    async def wake_up(self) -> dict[str, Any]:
        """Takes the engine's memory back after the train step, before the weight sync that follows it."""
        if self.asleep:
            if self._vllm_sleep:
                await self.engine.wake_up()
            self.asleep = False
        return {"asleep": False, "released": self._vllm_sleep}

    def _awake(self, what: str) -> None:
        if self.asleep:
            raise MaigymError(f"engine {self.engine_id}: {what} while asleep (the trainer holds the GPU)")

    async def prefix_cache_stats(self) -> dict[str, float]:
        """vLLM's own prefix-cache counters of this engine: queries and hits (in tokens)."""
        from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

        out = {"queries": 0.0, "hits": 0.0}
        for m in get_metrics_snapshot():
            if isinstance(m, Counter) and m.name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits"):
                out["queries" if m.name.endswith("queries") else "hits"] += float(m.value)
        return out

    async def reset_prefix_cache(self) -> None:
        """Drops every cached prefix (after a weight update, entries made with older weights are stale)."""
        await self.engine.reset_prefix_cache()

    async def shutdown(self) -> None:
        """Stops the engine and its engine-core process."""
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None
