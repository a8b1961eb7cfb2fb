"""The vLLM engine actor with the tiny default models (CPU): token-in/token-out, logprobs, prefix caching,
agreement with transformers, the screenshot path of the vision-language model, and a real episode."""

from __future__ import annotations

import asyncio
import dataclasses
import io

import pytest

from maigym_ray.config import EnvManagerConfig, PolicyConfig, PoolConfig
from maigym_ray.generation import SamplingConfig
from maigym_ray.harness.history import HistoryConfig, window_of
from maigym_ray.harness.prompt import PromptConfig
from maigym_ray.policy.engine import EngineActor, EngineConfig, resolve_model
from maigym_ray.policy.weight_receiver import encode_bucket
from maigym_ray.rollout import load_tokenizer, rollout
from maigym_ray.tasks.pool import TaskPool

pytestmark = pytest.mark.engine

GREEDY = SamplingConfig(temperature=0.0, max_tokens=8)


def start_engine(ray, model: str):
    cfg = EngineConfig(model=model, max_model_len=4096, cpu_kv_cache_gb=1, max_images=3)
    handle = (
        ray.remote(EngineActor)
        .options(num_cpus=0, runtime_env={"env_vars": cfg.process_env()})
        .remote(cfg, 0)
    )
    ray.get(handle.start.remote(), timeout=600)
    return handle, cfg


@pytest.fixture(scope="session")
def text_engine(ray_local):
    handle, cfg = start_engine(ray_local, "tiny-text")
    yield handle, cfg
    ray_local.get(handle.shutdown.remote())
    ray_local.kill(handle)


async def one_web_env(ray, task):
    """A started EnvManager with one web instance, for episodes through the engine."""
    from maigym_ray.envs.manager import EnvManager

    cfg = EnvManagerConfig(pools={"web": PoolConfig(target_size=1, max_size=1)})
    manager = ray.remote(EnvManager).options(num_cpus=0, max_concurrency=100).remote(cfg, TaskPool([task]))
    await manager.start.remote(wait=True)
    return manager


def prompt(n_tokens: int) -> list[int]:
    tok = load_tokenizer(resolve_model("tiny-text"))
    ids = tok.encode('<|im_start|>user\n[msg-m1] link "Invoice November" ' * 40, add_special_tokens=False).ids
    return ids[:n_tokens]


def buckets_of(model) -> list:
    """``model``'s state dict as the engine's ``update_weights`` takes it: buckets of 8 tensors."""

    named = list(model.state_dict().items())
    return [
        encode_bucket([n for n, _ in named[i : i + 8]], [t for _, t in named[i : i + 8]])
        for i in range(0, len(named), 8)
    ]


def test_engine_processes_are_not_pinned_to_one_core(text_engine, ray_local):
    """vLLM's CPU worker pins itself to one core under its own "auto" binding; Ray runs it at niceness 15, so one
    busy process on that core starved it (CI hung on it). Every engine process may use every core the actor may."""
    import os

    import psutil

    engine, cfg = text_engine
    assert cfg.process_env()["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    pid, cores = ray_local.get(
        engine.__ray_call__.remote(lambda self: (os.getpid(), sorted(os.sched_getaffinity(0))))
    )
    if len(cores) < 2:
        pytest.skip("one core: nothing to pin to")
    children = psutil.Process(pid).children(recursive=True)
    assert any(c.name().startswith("VLLM") for c in children), [c.name() for c in children]
    pinned = {c.name(): sorted(c.cpu_affinity()) for c in children if sorted(c.cpu_affinity()) != cores}
    assert not pinned, (pinned, cores)


async def test_generate_returns_ids_logprobs_and_cache_hits(text_engine):
    engine, _ = text_engine
    ids = prompt(200)
    before = await engine.prefix_cache_stats.remote()
    first = await engine.generate.remote(ids, [], GREEDY, "ep-a")
    second = await engine.generate.remote(ids, [], GREEDY, "ep-a")
    assert 1 <= len(first.response_ids) <= 8 and len(first.logprobs) == len(first.response_ids)
    assert all(lp <= 0.0 for lp in first.logprobs)
    assert first.response_ids == second.response_ids  # greedy is deterministic
    assert second.num_cached_tokens >= 192  # whole 32-token blocks of the repeated prompt
    after = await engine.prefix_cache_stats.remote()
    assert after["queries"] - before["queries"] >= 400 and after["hits"] - before["hits"] >= 192


async def test_a_sleeping_engine_refuses_work_until_it_wakes(text_engine):
    """Colocated mode's turn-taking on CPU: vLLM has no sleep mode here, so sleep releases nothing, but the
    engine refuses generation until it wakes (policy/engine.py, EngineActor.sleep)."""
    from maigym_ray.errors import MaigymError

    engine, _ = text_engine
    slept = await engine.sleep.remote()
    try:
        assert slept["asleep"] and not slept["released"]
        with pytest.raises(MaigymError, match="asleep"):
            await engine.generate.remote(prompt(40), [], GREEDY, "ep-sleep")
    finally:
        assert not (await engine.wake_up.remote())["asleep"]
    assert (await engine.generate.remote(prompt(40), [], GREEDY, "ep-sleep")).response_ids


@pytest.mark.numeric
async def test_greedy_matches_transformers(text_engine):
    import torch
    from transformers import AutoModelForCausalLM

    engine, _ = text_engine
    ids = prompt(64)
    got = await engine.generate.remote(ids, [], GREEDY, "ep-b")
    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny-text"), torch_dtype=torch.float32)
    out = model.generate(torch.tensor([ids]), max_new_tokens=len(got.response_ids), do_sample=False)
    assert tuple(out[0, len(ids) :].tolist()) == got.response_ids


async def test_episode_through_the_engine_keeps_prefixes_and_hits_the_cache(text_engine, ray_local):
    engine, cfg = text_engine
    task = dataclasses.replace(TaskPool.builtin().get("mail-archive-invoice"), max_steps=12)
    manager = await one_web_env(ray_local, task)
    policy = PolicyConfig(
        kind="engine",
        engine=cfg,
        history=HistoryConfig("window", 4, 1),
        sampling=SamplingConfig(temperature=1.0, max_tokens=16, seed=7),
    )
    try:
        traj = await rollout(manager, task, "web", policy, [engine])
    finally:
        await manager.shutdown.remote()
    assert not traj.infra_failed and len(traj.turns) == 12
    for prev, cur in zip(traj.turns, traj.turns[1:], strict=False):
        head = list(prev.prompt_ids) + list(prev.response_ids)
        if window_of(cur.index, 4, 1) == window_of(prev.index, 4, 1):
            assert list(cur.prompt_ids[: len(head)]) == head
            assert cur.timings["cached_tokens"] >= len(head) - 64  # all but the partial blocks
    assert all(len(u.logprobs) == len(u.response_ids) > 0 for u in traj.turns)


async def test_vision_language_model_sees_the_screenshot(ray_local):
    from PIL import Image

    engine, _ = start_engine(ray_local, "tiny-vl")
    try:
        tok = load_tokenizer(resolve_model("tiny-vl"))
        ids = tok.encode(
            "<|im_start|>user\nWhat is on screen?\n<image><|im_end|>\n<|im_start|>assistant\n",
            add_special_tokens=False,
        ).ids
        pngs = []
        for color in ("red", "blue"):
            buf = io.BytesIO()
            Image.new("RGB", (1024, 768), color).save(buf, "PNG")
            pngs.append(buf.getvalue())
        red = await engine.generate.remote(ids, [pngs[0]], GREEDY, "vl")
        red_again = await engine.generate.remote(ids, [pngs[0]], GREEDY, "vl")
        blue = await engine.generate.remote(ids, [pngs[1]], GREEDY, "vl")
        assert (
            red.response_ids == red_again.response_ids and red_again.num_cached_tokens >= 64
        )  # 2 whole blocks
        assert red.logprobs != blue.logprobs  # the image reaches the model

        # a real episode whose observation turns carry the browser's screenshots
        task = dataclasses.replace(TaskPool.builtin().get("mail-archive-invoice"), max_steps=4)
        manager = await one_web_env(ray_local, task)
        cfg = EngineConfig(model="tiny-vl", max_images=3)
        policy = PolicyConfig(
            kind="engine",
            engine=cfg,
            prompt=PromptConfig(observation="both"),
            history=HistoryConfig("window", 3, 1),
            sampling=SamplingConfig(temperature=1.0, max_tokens=8, seed=3),
        )
        try:
            traj = await rollout(manager, task, "web", policy, [engine])
        finally:
            await manager.shutdown.remote()
        assert not traj.infra_failed and len(traj.turns) == 4
        image_id = tok.token_to_id("<image>")
        assert [list(u.prompt_ids).count(image_id) for u in traj.turns] == [1, 2, 3, 2]
    finally:
        ray_local.get(engine.shutdown.remote())
        ray_local.kill(engine)


@pytest.mark.numeric
async def test_weight_update_matches_the_trainer_and_advances_the_version(text_engine):
    import torch
    from transformers import AutoModelForCausalLM

    engine, _ = text_engine
    ids = prompt(96)
    before = await engine.generate.remote(ids, [], GREEDY, "w-before")
    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny-text"), torch_dtype=torch.float32)
    torch.manual_seed(1)
    with torch.no_grad():  # a "training step": new weights everywhere
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    out = await engine.update_weights.remote(buckets_of(model), 1)
    assert out == {"tensors": len(model.state_dict()), "version": 1}
    after = await engine.generate.remote(ids, [], GREEDY, "w-after")
    assert after.policy_version == 1 and after.num_cached_tokens == 0  # old prefixes were dropped
    assert after.response_ids != before.response_ids
    ref = model.generate(torch.tensor([ids]), max_new_tokens=len(after.response_ids), do_sample=False)
    assert tuple(ref[0, len(ids) :].tolist()) == after.response_ids
    with torch.no_grad():  # and the engine's logprobs are the trainer's own forward pass
        logits = model(torch.tensor([ids + list(after.response_ids)])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    trainer_lp = [lp[len(ids) - 1 + i, tok].item() for i, tok in enumerate(after.response_ids)]
    assert all(abs(a - b) < 1e-3 for a, b in zip(trainer_lp, after.logprobs, strict=True))


@pytest.mark.numeric
async def test_broadcast_over_the_weight_group_matches_the_trainer(text_engine, ray_local):
    """The trainer (rank 0) broadcasts flat buckets over the weight group (gloo); the engine actor
    (rank 1) receives them and loads them into its vLLM worker. Afterwards the engine's greedy output and
    logprobs are the trainer's own, the version advanced and no stale prefix was served."""
    import torch
    from transformers import AutoModelForCausalLM

    from maigym_ray.weights import group as weight_group

    engine, _ = text_engine
    ids = prompt(96)
    before = await engine.generate.remote(ids, [], GREEDY, "b-before")
    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny-text"), torch_dtype=torch.float32)
    torch.manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    named = [(n, t.detach()) for n, t in model.state_dict().items()]  # tied lm_head included
    layout = weight_group.layout(named, bucket_bytes=256 << 10)  # several buckets
    assert len(layout) > 1
    trainer = ray_local.remote(weight_group.WeightSender).options(num_cpus=0).remote(named)
    group = "test-weights"
    await asyncio.gather(engine.join_weight_group.remote(2, 1, group), trainer.join.remote(2, group))
    version = before.policy_version + 1
    out, _ = await asyncio.gather(
        engine.receive_weights.remote(layout, version, group), trainer.send.remote(layout, group)
    )
    ray_local.kill(trainer)
    assert out["tensors"] == len(named)
    after = await engine.generate.remote(ids, [], GREEDY, "b-after")
    assert after.policy_version == version and after.num_cached_tokens == 0
    assert after.response_ids != before.response_ids
    ref = model.generate(torch.tensor([ids]), max_new_tokens=len(after.response_ids), do_sample=False)
    assert tuple(ref[0, len(ids) :].tolist()) == after.response_ids
    with torch.no_grad():
        logits = model(torch.tensor([ids + list(after.response_ids)])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    trainer_lp = [lp[len(ids) - 1 + i, tok].item() for i, tok in enumerate(after.response_ids)]
    assert all(abs(a - b) < 1e-3 for a, b in zip(trainer_lp, after.logprobs, strict=True))


@pytest.mark.numeric
async def test_a_constrained_reply_matches_the_regex_and_its_logprobs_are_the_masked_ones(text_engine):
    """Structured outputs: every sampled reply of the untrained model is one of the allowed actions. The
    logprobs vLLM returns are the constrained distribution's (the grammar masks the logits before its sampler
    computes them): never below the model's own, 0 where the grammar allowed one token. The trainer's
    TokenGrammar rebuilds the engine's masks from the regex: its constrained logprobs are the engine's."""
    import re

    import torch
    from transformers import AutoModelForCausalLM

    from maigym_ray.actions import parse_action
    from maigym_ray.harness.action_space import action_regex
    from maigym_ray.policy.grammar import TokenGrammar

    engine, _ = text_engine
    tok = load_tokenizer(resolve_model("tiny-text"))
    ids = prompt(96)
    # the session's engine may hold another test's weights: load the ones this test compares against
    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny-text"), torch_dtype=torch.float32)
    version = (await engine.generate.remote(ids, [], GREEDY, "c-version")).policy_version + 1
    assert (await engine.update_weights.remote(buckets_of(model), version))["version"] == version
    regex = action_regex(["click", "terminate"], ["msg-m13", "msg-m4", "home"])
    free = SamplingConfig(temperature=1.0, max_tokens=24)
    constrained = dataclasses.replace(free, regex=regex)
    outs = await asyncio.gather(*(engine.generate.remote(ids, [], constrained, f"c-{i}") for i in range(8)))
    replies = [tok.decode(list(o.response_ids), skip_special_tokens=True) for o in outs]
    assert all(re.fullmatch(regex, r) for r in replies), replies
    assert {parse_action(r).name for r in replies} <= {"click", "terminate"}
    unconstrained = await asyncio.gather(*(engine.generate.remote(ids, [], free, f"f-{i}") for i in range(8)))
    assert not any(re.fullmatch(regex, tok.decode(list(o.response_ids))) for o in unconstrained)

    assert all(o.policy_version == version for o in outs)
    grammar = TokenGrammar.from_model_dir(resolve_model("tiny-text"))
    forced = 0
    for out in outs:
        with torch.no_grad():
            logits = model(torch.tensor([ids + list(out.response_ids)])).logits[0].float()
        lp = torch.log_softmax(logits, -1)
        raw = [lp[len(ids) - 1 + i, t].item() for i, t in enumerate(out.response_ids)]
        assert all(m >= r - 1e-3 for r, m in zip(raw, out.logprobs, strict=True))
        forced += sum(m == 0.0 and r < -1.0 for r, m in zip(raw, out.logprobs, strict=True))
        resp = logits[len(ids) - 1 : len(ids) - 1 + len(out.response_ids)]
        allowed = grammar.allowed(regex, out.response_ids)
        masked = torch.log_softmax(resp.masked_fill(~allowed, float("-inf")), -1)
        ours = masked.gather(-1, torch.tensor(out.response_ids).unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(ours, torch.tensor(out.logprobs), rtol=0, atol=2e-3)
    assert forced > 0  # e.g. the '"' after 'click(id=': the only token the grammar allows there
    assert grammar.mismatches == 0


async def test_an_episode_with_visible_ids_only_never_clicks_an_id_off_the_screen(text_engine, ray_local):
    """The harness's action space (policy.action_space.visible_ids) on a real page: every step of the untrained
    model is a documented action, and every click names an id of that step's screen."""
    from maigym_ray.actions import parse_action
    from maigym_ray.harness.action_space import ActionSpaceConfig, visible_ids

    engine, cfg = text_engine
    task = dataclasses.replace(TaskPool.builtin().get("mail-archive-invoice"), max_steps=6)
    manager = await one_web_env(ray_local, task)
    policy = PolicyConfig(
        kind="engine",
        engine=cfg,
        prompt=PromptConfig(actions=["click", "terminate"]),
        sampling=SamplingConfig(temperature=1.0, max_tokens=24),
        action_space=ActionSpaceConfig(visible_ids=True),
    )
    try:
        traj = await rollout(manager, task, "web", policy, [engine])
    finally:
        await manager.shutdown.remote()
    assert not traj.infra_failed and traj.turns
    for turn in traj.turns:
        action = parse_action(turn.action_text)
        assert action.name in ("click", "terminate"), turn.action_text
        if action.name == "click":
            assert action.args["id"] in visible_ids(turn.a11y), (turn.action_text, turn.a11y)
        assert not turn.parse_error, turn.parse_error
