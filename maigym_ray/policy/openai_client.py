"""OpenAIEngine: the Engine protocol over any OpenAI-compatible server (``/v1/completions``).

Eval can then run an externally served model through the same harness. The prompt goes as token ids (vLLM's
and most compatible servers accept a list of ints as ``prompt``), built by the same prompt builder and history;
the reply text is encoded back with the local tokenizer, so its ids are a re-tokenisation: fine for eval, and
the reason RL uses the engine actors instead. Images need a chat endpoint and are refused here. A constrained
action space (``SamplingConfig.regex``) goes as vLLM's ``structured_outputs`` request field.
"""

from __future__ import annotations

from typing import Any

from maigym_ray.errors import ConfigError, InfraError
from maigym_ray.generation import Generation, SamplingConfig


class OpenAIEngine:
    """Completions against ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``) for ``model``."""

    def __init__(
        self, base_url: str, model: str, tokenizer: Any, api_key: str = "", timeout_s: float = 120.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.tokenizer = tokenizer
        self.api_key = api_key
        self.timeout_s = timeout_s

    async def generate(
        self, prompt_ids: list[int], images: list[bytes], sampling: SamplingConfig, episode_id: str
    ) -> Generation:
        import aiohttp

        if images:
            raise ConfigError("the OpenAI completions client takes no images: use prompt.observation=a11y")
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "logprobs": 1,
            "user": episode_id,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.regex:  # vLLM's server field; a server without structured outputs answers an error
            body["structured_outputs"] = {"regex": sampling.regex}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as s:
                async with s.post(f"{self.base_url}/completions", json=body, headers=headers) as r:
                    if r.status != 200:
                        raise InfraError(f"OpenAI server answered {r.status}: {(await r.text())[:300]}")
                    data = await r.json()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise InfraError(f"OpenAI server unreachable at {self.base_url}: {exc}") from exc
        choice = data["choices"][0]
        ids = tuple(self.tokenizer.encode(choice.get("text", ""), add_special_tokens=False).ids)
        lps = (choice.get("logprobs") or {}).get("token_logprobs") or []
        cached = ((data.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return Generation(ids, tuple(float(x) for x in lps if x is not None), int(cached))
