"""The learning guard's in-process engine (maigym_ray/testing/learning.py): batching concurrent episodes must
not change what each one samples, and a batch waits for exactly the episodes still running."""

from __future__ import annotations

import asyncio

import pytest
import torch

from maigym_ray.generation import SamplingConfig
from maigym_ray.policy.tiny_models import default_model_dir
from maigym_ray.rollout import load_tokenizer
from maigym_ray.testing.learning import TorchEngine

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def engine_and_prompts() -> tuple[TorchEngine, list[list[int]]]:
    model_dir = default_model_dir("text")
    tok = load_tokenizer(str(model_dir))
    prompts = [
        tok.encode(t, add_special_tokens=False).ids for t in ("hi", "click the OK button " * 6, "Step 1.")
    ]
    prompts.insert(2, list(prompts[1]))  # a group's attempts share their first prompt: prefilled once
    return TorchEngine(model_dir, (tok.token_to_id("<|im_end|>"),)), prompts


def test_a_left_padded_batch_samples_what_each_prompt_samples_alone(engine_and_prompts) -> None:
    engine, prompts = engine_and_prompts
    with torch.no_grad():
        alone = [engine._sample([p], 0.0, 12)[0] for p in prompts]
        batched = engine._sample(prompts, 0.0, 12)
    assert len({len(p) for p in prompts}) == len(prompts) - 1  # the rows really are padded
    for a, b in zip(alone, batched, strict=True):
        assert a.response_ids == b.response_ids
        assert len(b.logprobs) == len(b.response_ids)
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4


def test_a_request_waits_for_every_running_episode_then_one_batch_serves_them(engine_and_prompts) -> None:
    engine, prompts = engine_and_prompts
    sampling = SamplingConfig(temperature=0.0, max_tokens=4)
    batches: list[int] = []
    sample = engine._sample

    def counting(batch, temperature, max_tokens):
        batches.append(len(batch))
        return sample(batch, temperature, max_tokens)

    async def main() -> None:
        engine._sample = counting
        engine.begin(3)
        first = asyncio.ensure_future(engine.generate(prompts[0], [], sampling, "a"))
        second = asyncio.ensure_future(engine.generate(prompts[1], [], sampling, "b"))
        await asyncio.sleep(0.05)
        assert not first.done() and not second.done()  # the third episode has neither asked nor ended
        engine.end()  # it ends without asking
        assert (await first).response_ids and (await second).response_ids
        engine.end()
        engine.end()

    try:
        asyncio.run(main())
    finally:
        del engine._sample
    assert batches == [2] and engine.running == 0
