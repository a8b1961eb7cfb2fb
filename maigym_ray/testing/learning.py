"""A learning check in process, about a minute a run: SFT then GRPO on a tiny task family over the FakeBackend.

The main job (rl/driver.py) needs Ray, vLLM and Chromium, minutes to start and a quarter of an hour to show a
lift; CI needs a guard that fails when learning breaks (a flipped advantage sign, a zero learning rate, a
weight sync that never arrives). This module runs the same pieces the driver runs, in one process:

- the harness (``run_episode``, ``ModelPolicy`` / ``DemonstrationPolicy``, the prompt builder) against an
  in-process :class:`~maigym_ray.envs.actor.EnvActor` on the :class:`FakeBackend`;
- :class:`TorchEngine`: the engine's ``generate`` (ids in, sampled ids and logprobs out) on a transformers
  copy of the model, which sees new weights only when :meth:`TorchEngine.receive` is called (the sync);
- the trainer (:class:`~maigym_ray.rl.trainer.TorchTrainer`), packing and group advantages of rl/.

The family, ``fake-pick``: the screen lists a few buttons (labels drawn from ten) in a random order; the task
names one label; success is clicking that button's id and nothing else. Training and held-out instances use
disjoint seeds. With random ids the tiny model cannot learn to read the id off the screen in any budget a CI
test has (docs/experiments/2026-12-01-task-families.md), so the guard uses ids that follow from the label.
"""

from __future__ import annotations

import asyncio
import copy
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from maigym_ray.config import PoolConfig
from maigym_ray.generation import Generation, SamplingConfig
from maigym_ray.harness.config import HistoryConfig, PromptConfig
from maigym_ray.harness.demonstration import DemonstrationPolicy
from maigym_ray.harness.episode import run_episode
from maigym_ray.harness.model_policy import ModelPolicy
from maigym_ray.harness.prompt import PromptBuilder
from maigym_ray.rl.advantages import group_advantages
from maigym_ray.rl.packing import pack
from maigym_ray.rl.schedule import lr_factor
from maigym_ray.rl.trainer import TorchTrainer, TrainerConfig
from maigym_ray.types import TaskSpec, Trajectory

LABELS = ("OK", "Cancel", "Save", "Delete", "Next", "Back", "Send", "Close", "Help", "Open")
HELDOUT_SEED0 = 1_000_000


def fake_pick_task(
    seed: int, buttons: int = 3, ids: str = "per_label", cite_id: bool = False, labels: int = len(LABELS)
) -> TaskSpec:
    """Instance ``seed`` of the ``fake-pick`` family (held out from ``HELDOUT_SEED0`` on). ``ids``: "random"
    (new two-digit ids every instance: the id must be read off the screen) or "per_label" (a button's id
    follows from its label, ``b<label index>``: an association); ``cite_id`` names the id in the task;
    ``labels``: the buttons' labels are drawn from the first N of LABELS (fewer: fewer associations to learn)."""
    rng = random.Random(f"fake-pick:{seed}")
    labels_ = rng.sample(LABELS[:labels], buttons)
    numbers = rng.sample(range(10, 100), buttons)  # drawn either way: the instances do not depend on ``ids``
    if ids == "per_label":
        numbers = [LABELS.index(lab) for lab in labels_]
    ids_ = [f"b{n}" for n in numbers]
    target = rng.randrange(buttons)
    screen = "\n".join(f'[{i}] button "{lab}"' for i, lab in zip(ids_, labels_, strict=True))
    checks: list[dict[str, Any]] = [
        {"op": "exists", "app": "fake", "path": "clicked", "match": {"id": ids_[target]}}
    ]
    checks += [
        {"op": "absent", "app": "fake", "path": "clicked", "match": {"id": i}}
        for i in ids_
        if i != ids_[target]
    ]
    return TaskSpec(
        id=f"fake-pick-{seed}",
        instruction=f"Press “{labels_[target]}”" + (f" ({ids_[target]})." if cite_id else "."),
        apps=("fake",),
        platforms=("web",),
        initial_state={"fake": {"screens": [screen, "Done."]}},
        verifier={"name": "checks", "params": {"checks": checks}},
        golden=(f'click(id="{ids_[target]}")', 'terminate(status="success")'),
        max_steps=3,
        split="test" if seed >= HELDOUT_SEED0 else "train",
    )


#: The ``fake-pick`` family's system turn (``PromptConfig.system``): the two actions it needs and the task.
#: The harness's built-in turn documents every web action (about 420 of a first step's 444 tokens); the tiny
#: model then needs about 200 SFT steps on 64 demos before its reply attends to the label that decides the id,
#: and it learns that step abruptly (held-out 0.21 after 140 steps, 0.85 after 200). With this turn (about 60
#: tokens) it learns the label-to-id association several times sooner, and every update is cheaper
#: (docs/experiments/2026-12-02-learning-guard.md).
PICK_SYSTEM = (
    'Elements are listed as [id] role "name".\n'
    'Reply with one action: click(id="ID") or terminate(status="success").\n'
    "Task: {task}"
)


class TorchEngine:
    """The engine's ``generate`` on a transformers model in this process, batching concurrent requests.

    Like the vLLM engine, it serves many episodes at once: a request waits until every episode still running
    (:meth:`begin` / :meth:`end`) has asked or finished, then the waiting prompts are sampled as one
    left-padded batch with a KV cache. One batched forward per token instead of one per episode and token is
    what keeps the CI guard's rollouts in seconds. Batches are formed only by that count, never by time, so a
    seed gives the same samples on every run."""

    def __init__(self, model_dir: str | Path, stop_ids: tuple[int, ...], seed: int = 0) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
        self.stop_ids = set(stop_ids)
        self.gen = torch.Generator().manual_seed(seed)
        self.version = 0
        self.running = 0
        self._waiting: list[tuple[list[int], SamplingConfig, asyncio.Future[Generation]]] = []

    def receive(self, weights: list[tuple[str, torch.Tensor]], version: int) -> None:
        """The weight sync: load the trainer's tensors."""
        self.model.load_state_dict(dict(weights), strict=False)
        self.version = version

    def begin(self, episodes: int) -> None:
        """``episodes`` more episodes are running (each ends with :meth:`end`)."""
        self.running += episodes

    def end(self) -> None:
        """An episode ended: the others need not wait for it."""
        self.running -= 1
        self._flush()

    async def generate(
        self, prompt_ids: list[int], images: list[bytes], sampling: SamplingConfig, episode_id: str
    ) -> Generation:
        """Samples up to ``sampling.max_tokens`` ids (greedy at temperature 0); logprobs at temperature 1."""
        fut: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._waiting.append((list(prompt_ids), sampling, fut))
        self._flush()
        return await fut

    def _flush(self) -> None:
        if not self._waiting or len(self._waiting) < self.running:
            return
        waiting, self._waiting = self._waiting, []
        by_sampling: dict[tuple[float, int], list[int]] = {}
        for k, (_, sampling, _) in enumerate(waiting):
            by_sampling.setdefault((sampling.temperature, sampling.max_tokens), []).append(k)
        for (temperature, max_tokens), rows in by_sampling.items():
            try:
                with torch.no_grad():
                    outs = self._sample([waiting[k][0] for k in rows], temperature, max_tokens)
            except Exception as exc:  # every waiting episode gets the error; none waits forever
                for k in rows:
                    waiting[k][2].set_exception(exc)
                continue
            for k, out in zip(rows, outs, strict=True):
                waiting[k][2].set_result(out)

    def _sample(self, prompts: list[list[int]], temperature: float, max_tokens: int) -> list[Generation]:
        """[B] prompts, each distinct one prefilled once (a group's attempts share their first prompt), left-
        padded to one batch; each row stops at its first stop id."""
        distinct: dict[tuple[int, ...], int] = {}
        row_of = torch.tensor([distinct.setdefault(tuple(p), len(distinct)) for p in prompts])
        width = max(len(p) for p in distinct)
        ids = torch.zeros((len(distinct), width), dtype=torch.long)
        mask = torch.zeros((len(distinct), width), dtype=torch.long)
        for b, p in enumerate(distinct):
            ids[b, width - len(p) :] = torch.tensor(p)
            mask[b, width - len(p) :] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        res = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
        past = res.past_key_values
        past.reorder_cache(row_of)  # one cache row per prompt, copied from its distinct prompt's
        logits, mask, pos = res.logits[row_of, -1], mask[row_of], pos[row_of, -1:]
        out: list[list[int]] = [[] for _ in prompts]
        lps: list[list[float]] = [[] for _ in prompts]
        live = torch.ones(len(prompts), dtype=torch.bool)
        for _ in range(max_tokens):
            logp = torch.log_softmax(logits.float(), dim=-1)  # [B, V]
            if temperature <= 0:
                tok = logp.argmax(-1)
            else:
                probs = torch.softmax(logp / temperature, dim=-1)
                tok = torch.multinomial(probs, 1, generator=self.gen)[:, 0]
            for b in torch.nonzero(live)[:, 0].tolist():
                t = int(tok[b])
                out[b].append(t)
                lps[b].append(float(logp[b, t]))
                if t in self.stop_ids:
                    live[b] = False
            if not live.any():
                break
            mask = torch.cat([mask, torch.ones((len(prompts), 1), dtype=torch.long)], dim=1)
            pos = pos + 1
            res = self.model(
                input_ids=tok[:, None], attention_mask=mask, position_ids=pos, past_key_values=past
            )
            past, logits = res.past_key_values, res.logits[:, -1]
        return [Generation(tuple(o), tuple(lp), 0, self.version) for o, lp in zip(out, lps, strict=True)]


@dataclass
class LearningConfig:
    """One in-process SFT + GRPO run on ``fake-pick`` (the defaults are the CI test's)."""

    #: fixed demonstrations (training instances 0..n-1) and SFT steps over them.
    sft_demos: int = 24
    sft_steps: int = 60
    sft_lr: float = 3e-3
    #: GRPO rounds, groups per round (each a fresh training instance), attempts per group.
    rounds: int = 25
    groups: int = 8
    group_size: int = 12
    lr: float = 5e-4
    kl_coef: float = 0.0
    #: passes over a round's sequences (the driver's ``grpo.epochs``).
    epochs: int = 2
    #: held-out instances (greedy evals).
    heldout: int = 96
    #: buttons on each screen, and how their ids are drawn (:func:`fake_pick_task`).
    buttons: int = 3
    ids: str = "per_label"
    cite_id: bool = False
    #: "full" (the harness's system prompt, every web action) or "compact" (:data:`PICK_SYSTEM`).
    prompt: str = "compact"
    seed: int = 0
    # The breakages the CI test must catch: each one, set, must take the lift away.
    #: multiplies every advantage (-1: the broken sign).
    advantage_sign: float = 1.0
    #: False: the engine never receives the RL weights (a sync that never arrives).
    sync: bool = True


class LearningRun:
    """The run of one :class:`LearningConfig`; :meth:`run` returns held-out success before / SFT / RL."""

    def __init__(self, cfg: LearningConfig, model_dir: str | Path | None = None) -> None:
        from transformers import AutoModelForCausalLM

        from maigym_ray.policy.tiny_models import default_model_dir
        from maigym_ray.rollout import load_tokenizer

        self.cfg = cfg
        model_dir = model_dir or default_model_dir("text")
        torch.manual_seed(cfg.seed)
        tok = load_tokenizer(str(model_dir))
        self.encode = lambda s: tok.encode(s, add_special_tokens=False).ids
        self.decode = lambda ids: tok.decode(ids, skip_special_tokens=True)
        end = tok.token_to_id("<|im_end|>")
        self.end_ids = (end,)
        self.history = HistoryConfig()
        system = {"full": "", "compact": PICK_SYSTEM}[cfg.prompt]
        self.builder = PromptBuilder(self.encode, PromptConfig(repeat_task=True, system=system))
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        self.trainer = TorchTrainer(
            model, TrainerConfig(lr=cfg.lr, kl_coef=cfg.kl_coef, aggregation="seq_mean_token_mean")
        )
        self.engine = TorchEngine(model_dir, (end, tok.token_to_id("<|endoftext|>")), seed=cfg.seed)
        self.version = 0
        self.rng = random.Random(cfg.seed)
        self._envs: list[Any] = []

    async def _actor(self, k: int) -> Any:
        """The ``k``-th environment (one per concurrent episode), started on first use."""
        from maigym_ray.envs.actor import EnvActor

        while len(self._envs) <= k:
            env = EnvActor()
            await env.start(f"fake-learning-{len(self._envs)}", PoolConfig(backend="fake"), [])
            self._envs.append(env)
        return self._envs[k]

    async def _episodes(self, tasks: list[TaskSpec], policy: Any) -> list[Trajectory]:
        """``tasks`` run at once, one environment each, their generations batched by the engine."""
        envs = [await self._actor(k) for k in range(len(tasks))]

        async def one(env: Any, task: TaskSpec) -> Trajectory:
            try:
                return await run_episode(env, task, policy)
            finally:
                self.engine.end()

        self.engine.begin(len(tasks))
        return list(await asyncio.gather(*(one(e, t) for e, t in zip(envs, tasks, strict=True))))

    def _policy(self, temperature: float) -> ModelPolicy:
        sampling = SamplingConfig(temperature=temperature, max_tokens=16)
        return ModelPolicy(self.engine, self.builder, self.decode, self.history, sampling)

    def _sync(self) -> None:
        self.version += 1
        self.engine.receive(self.trainer.weights(), self.version)

    async def evaluate(self) -> float:
        """Greedy held-out success on fresh instances (seeds the training split never uses)."""
        tasks = [
            fake_pick_task(HELDOUT_SEED0 + i, self.cfg.buttons, self.cfg.ids, self.cfg.cite_id)
            for i in range(self.cfg.heldout)
        ]
        trajs = await self._episodes(tasks, self._policy(0.0))
        return sum(t.reward.success for t in trajs) / len(trajs)

    async def sft(self) -> None:
        """SFT on the fixed demonstrations (the golden replays of training instances 0..sft_demos-1)."""
        demo = DemonstrationPolicy(self.builder, self.encode, self.decode, self.end_ids, self.history)
        tasks = [
            fake_pick_task(i, self.cfg.buttons, self.cfg.ids, self.cfg.cite_id)
            for i in range(self.cfg.sft_demos)
        ]
        seqs = [s for t in await self._episodes(tasks, demo) for s in pack(t, self.history, 1.0)]
        rng = random.Random(self.cfg.seed)
        for step in range(self.cfg.sft_steps):
            self.trainer.set_lr(self.cfg.sft_lr * lr_factor(step, self.cfg.sft_steps, 5, "cosine"))
            self.trainer.update(rng.sample(seqs, min(16, len(seqs))), objective="sft")
        self.trainer.set_lr(self.cfg.lr)
        self._reference()
        self._sync()

    def _reference(self) -> None:
        # Only a KL term needs the reference: with kl_coef 0 the trainer would run a forward of it every
        # update just to log the KL, a third of the RL phase's update time.
        self.trainer.ref_model = None
        if self.cfg.kl_coef:
            self.trainer.freeze_reference()

    async def grpo_round(self, r: int) -> float:
        """One round on fresh training instances; returns the round's rollout success."""
        base = self.cfg.sft_demos + r * self.cfg.groups  # instances SFT never saw, new every round
        tasks = [
            fake_pick_task(base + g, self.cfg.buttons, self.cfg.ids, self.cfg.cite_id)
            for g in range(self.cfg.groups)
        ]
        policy = self._policy(1.0)
        k = self.cfg.group_size
        every = await self._episodes([t for t in tasks for _ in range(k)], policy)
        seqs, wins, n = [], 0, 0
        for g in range(len(tasks)):
            trajs = every[g * k : (g + 1) * k]
            rewards = torch.tensor([[x.reward.value for x in trajs]])
            wins += int(sum(x.reward.success for x in trajs))
            n += len(trajs)
            adv = group_advantages(rewards)[0] * self.cfg.advantage_sign
            for x, a in zip(trajs, adv.tolist(), strict=True):
                if a != 0.0:
                    seqs.extend(pack(x, self.history, a))
        if seqs:
            for _ in range(self.cfg.epochs):
                self.trainer.update(seqs)
            if self.cfg.sync:
                self._sync()
        return wins / max(1, n)

    async def _run(self, start: dict[str, Any] | None) -> dict[str, Any]:
        if (
            start is None
        ):  # before, SFT, and the SFT'd weights (a later run with other RL settings reuses them)
            before = await self.evaluate()
            await self.sft()
            weights = {k: v.clone() for k, v in self.trainer.model.state_dict().items()}
            opt = copy.deepcopy(self.trainer.opt.state_dict())
            start = {"before": before, "sft": await self.evaluate(), "weights": weights, "opt": opt}
        else:
            self.trainer.model.load_state_dict(start["weights"])
            self.trainer.opt.load_state_dict(copy.deepcopy(start["opt"]))
            self.trainer.set_lr(self.cfg.lr)
            self._reference()
            self._sync()
        out: dict[str, Any] = {"before": start["before"], "sft": start["sft"]}
        out["rounds"] = [await self.grpo_round(r) for r in range(self.cfg.rounds)]
        out["rl"] = await self.evaluate()
        out["start"] = start
        return out

    def run(self, start: dict[str, Any] | None = None) -> dict[str, Any]:
        """Held-out success before training, after SFT and after RL, and each round's rollout success.
        ``start``: a previous run's ``out["start"]`` (same SFT settings), to skip its evals and SFT."""
        return asyncio.run(self._run(start))


#: SFT results by the settings that decide them (the RL breakages share one warm-up).
_STARTS: dict[tuple, dict[str, Any]] = {}


def run_learning(cfg: LearningConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """:class:`LearningRun` of ``cfg`` with ``overrides`` applied; runs whose SFT settings match an earlier
    run in this process start from its post-SFT weights."""
    cfg = replace(cfg or LearningConfig(), **overrides)
    key = (
        cfg.sft_demos,
        cfg.sft_steps,
        cfg.sft_lr,
        cfg.heldout,
        cfg.buttons,
        cfg.ids,
        cfg.cite_id,
        cfg.prompt,
        cfg.seed,
    )
    out = LearningRun(cfg).run(_STARTS.get(key))
    _STARTS[key] = out.pop("start")
    return out


def _run_arms(arms: list[dict[str, Any]], threads: int) -> list[dict[str, Any]]:
    torch.set_num_threads(threads)
    return [run_learning(LearningConfig(), **arm) for arm in arms]


def run_learning_parallel(lanes: list[list[dict[str, Any]]], threads: int = 1) -> list[list[dict[str, Any]]]:
    """Runs each lane (a list of ``run_learning`` overrides, in order) in its own process, the lanes side by
    side; returns the results lane by lane. A lane's runs share its SFT (see :func:`run_learning`), and every
    lane's SFT is the same computation, so runs of different lanes start from equal weights. The CI guard
    runs its four RL arms in two lanes: on two cores that halves its wall time, and one torch thread a
    process is what the settings were chosen at (docs/experiments/2026-12-02-learning-guard.md)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")  # a forked torch can deadlock in its thread pools
    with ProcessPoolExecutor(max_workers=len(lanes), mp_context=ctx) as pool:
        futures = [pool.submit(_run_arms, lane, threads) for lane in lanes]
        return [f.result() for f in futures]
