"""OpenAIEngine against a local server that speaks the OpenAI completions protocol."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aiohttp import web

from maigym_ray.errors import ConfigError, InfraError
from maigym_ray.generation import SamplingConfig
from maigym_ray.policy.openai_client import OpenAIEngine
from maigym_ray.testing.loopback_http import loopback_http

pytestmark = pytest.mark.unit


class CharTokenizer:
    def encode(self, text: str, add_special_tokens: bool = False) -> SimpleNamespace:
        return SimpleNamespace(ids=[ord(c) for c in text])


@pytest.fixture
async def server():
    seen: list[dict] = []

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("Authorization", "")})
        if body["model"] == "broken":
            return web.Response(status=500, text="boom")
        return web.json_response(
            {
                "choices": [{"text": 'click(id="a")', "logprobs": {"token_logprobs": [-0.1, -0.2, None]}}],
                "usage": {
                    "prompt_tokens": len(body["prompt"]),
                    "prompt_tokens_details": {"cached_tokens": 32},
                },
            }
        )

    async with loopback_http(web.post("/v1/completions", completions)) as port:
        yield f"http://127.0.0.1:{port}/v1", seen


async def test_completion_with_token_prompt(server):
    url, seen = server
    engine = OpenAIEngine(url, "tiny", CharTokenizer(), api_key="k")
    gen = await engine.generate([1, 2, 3], [], SamplingConfig(temperature=0.5, max_tokens=7, seed=3), "ep1")
    assert gen.response_ids == tuple(ord(c) for c in 'click(id="a")')
    assert gen.logprobs == (-0.1, -0.2) and gen.num_cached_tokens == 32
    body = seen[0]["body"]
    assert body["prompt"] == [1, 2, 3] and body["max_tokens"] == 7 and body["seed"] == 3
    assert body["temperature"] == 0.5 and seen[0]["auth"] == "Bearer k"
    assert "structured_outputs" not in body  # free text unless the action space constrains it
    await engine.generate([1], [], SamplingConfig(regex='click\\(id="a"\\)'), "ep2")
    assert seen[1]["body"]["structured_outputs"] == {"regex": 'click\\(id="a"\\)'}


async def test_server_errors_are_infra_errors_and_images_are_refused(server):
    url, _ = server
    with pytest.raises(InfraError, match="500"):
        await OpenAIEngine(url, "broken", CharTokenizer()).generate([1], [], SamplingConfig(), "e")
    with pytest.raises(InfraError, match="unreachable"):
        await OpenAIEngine("http://127.0.0.1:9/v1", "m", CharTokenizer(), timeout_s=2).generate(
            [1], [], SamplingConfig(), "e"
        )
    with pytest.raises(ConfigError):
        await OpenAIEngine(url, "m", CharTokenizer()).generate([1], [b"png"], SamplingConfig(), "e")


class CharTok(CharTokenizer):
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)

    def token_to_id(self, token: str):
        return None


async def test_config_sets_chat_format_and_reads_the_api_key_from_the_named_variable(server, monkeypatch):
    from maigym_ray import rollout
    from maigym_ray.config import PolicyConfig
    from maigym_ray.harness.config import ChatConfig
    from maigym_ray.testing import fake_task
    from maigym_ray.types import Observation

    url, seen = server
    monkeypatch.setattr(rollout, "load_tokenizer", lambda _dir: CharTok())
    cfg = PolicyConfig(
        kind="openai",
        options={"base_url": url, "model": "m", "api_key_env": "MAIGYM_TEST_KEY"},
        chat=ChatConfig(
            format="llama3", assistant_open="<|start_header_id|>assistant<|end_header_id|>\n\nAction: "
        ),
    )
    monkeypatch.delenv("MAIGYM_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="MAIGYM_TEST_KEY"):
        rollout.check_model_settings(cfg)
    monkeypatch.setenv("MAIGYM_TEST_KEY", "s3cret")
    rollout.check_model_settings(cfg)
    policy = rollout.make_policy(cfg)
    obs = Observation(platform="web", screenshot=b"", width=10, height=10, a11y='[a] button "OK"')
    await policy.act(fake_task(), obs, 0, "ep")
    assert seen[-1]["auth"] == "Bearer s3cret"
    prompt = "".join(chr(i) for i in seen[-1]["body"]["prompt"])
    assert prompt.startswith("<|start_header_id|>system<|end_header_id|>\n\nYou operate")
    assert (
        prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\nAction: ")
        and "<|im_start|>" not in prompt
    )
    for bad in (ChatConfig(format="vicuna"), ChatConfig(user="no placeholder")):
        with pytest.raises(ConfigError, match="chat"):
            rollout.check_model_settings(PolicyConfig(kind="engine", chat=bad))
