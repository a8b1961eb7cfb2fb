"""Unit tests for the tiny local models (maigym_ray/policy/tiny_models.py): reproducible, loadable, usable.

No vLLM here (the engine tier covers serving); transformers only, on CPU, in a few seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from maigym_ray.policy import tiny_models as tm

pytestmark = [pytest.mark.unit, pytest.mark.numeric]

ACTION_STRINGS = [
    'click(id="search")',
    'type(id="to", text="Berlin")',
    'answer(text="89")',
    '[msg-m1] link "Invoice November"',
    'hotkey(keys=["Control", "a"])\nGrüße, 日本 {"done": true, "reward": 1.0}\t end',
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="module")
def text_dir(cache: Path) -> Path:
    return tm.default_model_dir("text", cache_dir=cache)


@pytest.fixture(scope="module")
def vl_dir(cache: Path) -> Path:
    return tm.default_model_dir("vl", cache_dir=cache)


def _image(color: tuple[int, int, int], size: tuple[int, int] = (640, 400)):
    from PIL import Image

    return Image.new("RGB", size, color)


def test_default_model_dir_builds_once_into_place(cache: Path, text_dir: Path) -> None:
    assert text_dir == cache / f"tiny-text-{tm.VERSION}"
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {
        p.name for p in text_dir.iterdir()
    }
    mtime = (text_dir / "model.safetensors").stat().st_mtime_ns
    assert tm.default_model_dir("text", cache_dir=str(cache)) == text_dir  # cached: not rebuilt
    assert (text_dir / "model.safetensors").stat().st_mtime_ns == mtime
    assert not [p.name for p in cache.iterdir() if p.name.startswith(".")]  # no temp build dir left
    with pytest.raises(ValueError, match="unknown tiny model kind"):
        tm.default_model_dir("audio", cache_dir=cache)


@pytest.mark.parametrize("kind", ["text", "vl"])
def test_same_seed_gives_byte_identical_weights(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first = request.getfixturevalue(f"{kind}_dir")
    build = tm.build_text_model if kind == "text" else tm.build_vl_model
    again = build(tmp_path / kind, seed=0)
    assert tm.weights_sha256(again) == tm.weights_sha256(first)
    for name in ("config.json", "tokenizer.json"):
        assert (again / name).read_bytes() == (first / name).read_bytes()
    if kind == "text":
        assert tm.weights_sha256(build(tmp_path / "other", seed=1)) != tm.weights_sha256(first)


def test_text_model_loads_and_generates_greedily(text_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(text_dir)
    model = AutoModelForCausalLM.from_pretrained(text_dir).eval()
    cfg = model.config
    assert type(model).__name__ == "Qwen2ForCausalLM" and model.dtype == torch.float32
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads) == (
        2,
        128,
        2,
        1,
    )
    assert cfg.head_dim == 64 and cfg.tie_word_embeddings and cfg.vocab_size == len(tok)
    inputs = tok.apply_chat_template(
        [{"role": "user", "content": "Open the invoice"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    runs = [model.generate(**inputs, max_new_tokens=5, min_new_tokens=5, do_sample=False) for _ in range(2)]
    assert runs[0].shape[1] == inputs["input_ids"].shape[1] + 5
    assert torch.equal(runs[0], runs[1])


def test_tokenizer_round_trips_actions_and_renders_chatml(text_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(text_dir)
    built = tm.build_tokenizer()
    assert 2000 <= len(tok) <= 4000
    for s in ACTION_STRINGS:
        ids = tok(s)["input_ids"]
        assert tok.decode(ids) == s
        assert ids == built(s)["input_ids"]  # the loaded tokenizer splits exactly as the trained one
    assert len(tok('type(id="to", text="Berlin")')["input_ids"]) <= 12  # learned pieces, not bytes
    for special in tm.TEXT_SPECIAL_TOKENS:
        assert len(tok(special)["input_ids"]) == 1
    assert tok.eos_token == tok.pad_token == "<|endoftext|>"
    rendered = tok.apply_chat_template(
        [{"role": "system", "content": "Act."}, {"role": "user", "content": "Go"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert (
        rendered
        == "<|im_start|>system\nAct.<|im_end|>\n<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n"
    )


def test_vl_processor_expands_one_image_to_64_tokens_and_model_runs(vl_dir: Path, text_dir: Path) -> None:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    processor = AutoProcessor.from_pretrained(vl_dir)
    model = AutoModelForImageTextToText.from_pretrained(vl_dir).eval()
    assert type(model).__name__ == "Idefics3ForConditionalGeneration"
    assert type(processor.image_processor).__name__ == "Idefics3ImageProcessorPil"
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where is the button?"}]}],
        add_generation_prompt=True,
    )
    assert prompt.count("<image>") == 1
    inputs = processor(images=[_image((200, 30, 30))], text=prompt, return_tensors="pt")
    ids = inputs["input_ids"][0].tolist()
    assert ids.count(model.config.image_token_id) == tm.IMAGE_TOKENS_PER_IMAGE == 64
    assert tuple(inputs["pixel_values"].shape) == (1, 1, 3, 448, 448)
    with torch.no_grad():
        logits = model(**inputs).logits
        other = model(
            **processor(images=[_image((10, 200, 30), (300, 500))], text=prompt, return_tensors="pt")
        )
    assert tuple(logits.shape) == (1, len(ids), model.config.text_config.vocab_size)
    assert not torch.allclose(logits[0, -1], other.logits[0, -1])  # the image reaches the text stack
    out = model.generate(**inputs, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape[1] == len(ids) + 5
    # Text tokens share ids with the text model; the vision specials come after them.
    text_tok = AutoTokenizer.from_pretrained(text_dir)
    for s in ACTION_STRINGS:
        assert processor.tokenizer(s)["input_ids"] == text_tok(s)["input_ids"]
    assert min(processor.tokenizer.convert_tokens_to_ids(tm.VISION_SPECIAL_TOKENS)) == len(text_tok)
