"""The training driver (a Ray actor): held-out eval, SFT warm-up, GRPO rounds, report. It reads top to bottom.

One GRPO round is: sample tasks (adaptive sampler) → lease envs and roll out groups (the one rollout path) →
verify (the env's verifier scored each episode) → write the trajectories to Parquet → group advantages →
drop zero-variance groups → pack windows → update the policy → broadcast the weights to every engine → log →
checkpoint. Infra-failed episodes are retried by the rollout runner and, if they still fail, kept out of the
gradient (they are stored, flagged), never scored 0.

``Driver(job, tasks, roles)``: the job's settings and the tasks by role (rl/driver_config.py), and the live roles
(rl/roles.py). Create it with the options of ``runtime/placement.py`` (cli/train.py); the session
(runtime/session.py) brings up the env manager, the engine actors and the trainer group and hands them to the
driver as its roles. The driver holds no
model: trainer rank 0 is rank 0 of the weight group and broadcasts straight to the engines.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from maigym_ray.config import PolicyConfig
from maigym_ray.durable import atomic_write_text, seal
from maigym_ray.errors import ConfigError
from maigym_ray.harness.trajectory_store import write_all
from maigym_ray.rates import fmt_rate, rate
from maigym_ray.rl.advantages import (
    format_advantages,
    group_advantages,
    step_penalized,
    zero_variance_share,
)
from maigym_ray.rl.credit import uncredited_steps
from maigym_ray.rl.driver_config import (
    DriverConfig,
    GRPOConfig,
    HeldoutConfig,
    JobConfig,
    SFTConfig,
    TaskSplit,
)
from maigym_ray.rl.group_stream import GroupStream, StartedGroup, pool_lanes
from maigym_ray.rl.packing import PackedSequence, pack, step_scales
from maigym_ray.rl.report import write_report
from maigym_ray.rl.roles import Roles
from maigym_ray.rl.run_state import PHASES, RunState, sealed_checkpoint
from maigym_ray.rl.sampler import AdaptiveSampler
from maigym_ray.rl.schedule import lr_factor
from maigym_ray.rl.staleness import group_version
from maigym_ray.rl.trainer_group import TrainerGroup
from maigym_ray.rl.weight_publisher import WeightPublisher
from maigym_ray.rollout import Finished, run_rollouts
from maigym_ray.types import TaskSpec, Trajectory

__all__ = [
    "Driver",
    "DriverConfig",
    "GRPOConfig",
    "HeldoutConfig",
    "JobConfig",
    "RunState",
    "SFTConfig",
    "TaskSplit",
    "sealed_checkpoint",
]


class Driver:
    """Runs the main training job in ``run_dir``; see the module docstring."""

    def __init__(self, job: JobConfig, tasks: TaskSplit, roles: Roles | None = None) -> None:
        """``job`` is what the driver reads of the run's config, ``tasks`` the tasks it uses by role
        (rl/driver_config.py), and ``roles`` the live parts it works over (:class:`~maigym_ray.rl.roles.Roles`,
        brought up by runtime/training.py): the EnvManager, the engines, the trainer group and how the weights
        reach them."""
        self.cfg, self.policy, self.trainer_cfg, self.env_cfg = job.driver, job.policy, job.trainer, job.env
        self.train_tasks, self.test_tasks, self.rl_tasks = tasks.train, tasks.heldout, list(tasks.rl or [])
        self.tasks = {t.id: t for t in [*self.train_tasks, *self.rl_tasks, *self.test_tasks]}
        self.platforms = sorted({p.platform for p in job.env.pools.values()})
        self.run_dir = Path(job.run_dir)
        self.sampler = AdaptiveSampler([t.id for t in self.rl_tasks], job.sampler, seed=job.driver.seed)
        self.wandb_mode, self.wandb_project = job.wandb_mode, job.wandb_project
        self.state = RunState()
        roles = roles or Roles()
        self.manager: Any = roles.manager
        self.engines: list[Any] = list(roles.engines)
        self.trainer: TrainerGroup | None = roles.trainer
        self.task_options: dict[str, Any] | None = roles.task_options
        self.colocated: bool = roles.colocated
        if self.colocated and job.driver.mode == "async":
            raise ConfigError(
                "driver.mode=async overlaps rollouts with updates, but topology.mode=colocated engines sleep "
                "through every update: use topology.mode=disaggregated, or driver.mode=sync"
            )
        self.publisher = WeightPublisher(self.engines, roles.sync_backend, roles.bucket_mb)
        self._wandb: Any = None
        self._stream: GroupStream | None = None  # the async pool, open through the RL phase
        self._round_end = 0.0

    # -- the job ------------------------------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        """Held-out eval → SFT warm-up → held-out eval → GRPO rounds → held-out eval → report."""
        t_start = time.perf_counter()
        await self._start()
        spent = self.state.seconds
        try:
            if self.state.phase == "start":
                if self.cfg.heldout.before:
                    self.state.heldout["before"] = await self.evaluate("before")
                self._advance("before", spent + time.perf_counter() - t_start)
            if self.state.phase == "before":
                await self.sft()
                self.state.heldout["sft"] = await self.evaluate("sft")
                self._advance("sft", spent + time.perf_counter() - t_start)
            bar = tqdm(total=self.cfg.grpo.rounds, initial=self.state.round, desc="GRPO", unit="round")
            while self.state.round < self.cfg.grpo.rounds:
                metrics = await self.grpo_round(self.state.round)
                self.state.round += 1
                self._log(metrics)
                self.state.seconds = spent + time.perf_counter() - t_start
                self._checkpoint()
                bar.update(1)
                bar.set_postfix(success=fmt_rate(metrics["success"]), loss=f"{metrics['loss']:.3f}")
            bar.close()
            await self._close_stream()
            if self.state.phase == "sft":
                self._advance("rl", spent + time.perf_counter() - t_start)
            if self.state.phase == "rl":
                # With no GRPO round the weights are the post-SFT ones the last eval scored: an SFT-only job
                # (driver.grpo.rounds=0) reports no RL figure rather than scoring the same weights twice.
                if self.state.round:
                    self.state.heldout["rl"] = await self.evaluate("rl")
                self._advance("done", spent + time.perf_counter() - t_start)
            report = write_report(self.run_dir, self._report())
        finally:
            await self._close_stream()
            await self._stop()
        return report

    async def grpo_round(self, r: int) -> dict[str, Any]:
        """One GRPO round, which is one policy update (see the module docstring); returns its metrics. Sync:
        the round's groups roll out, then train. Async: the round takes the next finished groups of the
        everlasting pool (rl/group_stream.py) while the pool goes on rolling out."""
        assert self.trainer is not None
        t0 = time.perf_counter()
        busy0 = await self._engine_busy()
        if self.cfg.mode == "async":
            taken, stale = await self._async_groups(r)
        else:
            taken, stale = await self._sync_groups(r), []
        episodes = [f for g, _ in taken for f in g]
        self._store(f"rl/round-{r:04d}", [f.trajectory for f in episodes])  # on disk before it is trained on
        if stale:  # past the staleness bound: kept, never trained on
            self._store(f"rl/stale-{r:04d}", [f.trajectory for g in stale for f in g])
        t1 = time.perf_counter()

        seqs: list[PackedSequence] = []
        penalized: list[torch.Tensor] = []  # each group's rewards, for the zero-variance share
        ages: list[int] = []
        for group, age in taken:
            trajs = [f.trajectory for f in group if not f.trajectory.infra_failed]
            if not trajs:
                continue
            ages.append(age)
            seqs.extend(self._group_sequences(group[0].task, trajs, age, penalized))

        stats: dict[str, float] = {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "tokens": 0.0}
        if seqs:
            async with self._engines_asleep():
                # in a thread: the event loop goes on serving the async pool while the trainer computes
                stats = await asyncio.to_thread(self._update, seqs)
        t2 = time.perf_counter()
        sync_s = await self._broadcast() if seqs else 0.0
        if self._stream is not None:
            await self._stream.advanced()  # after the publish: the next groups start on the new weights
        busy1 = await self._engine_busy()
        scored = [f.trajectory for f in episodes if not f.trajectory.infra_failed]
        now = time.perf_counter()
        by_staleness = {
            int(k[len("trained_s") :]): stats[f"clipped_s{k[len('trained_s') :]}"] / v
            for k, v in stats.items()
            if k.startswith("trained_s") and v > 0
        }
        metrics = {
            "round": r,
            "version": self.state.version,
            "mode": self.cfg.mode,
            "episodes": len(episodes),
            "infra_failed": len(episodes) - len(scored),
            "success": rate(sum(t.reward.success for t in scored), len(scored)),
            "reward": rate(sum(t.reward.value for t in scored), len(scored)),
            "zero_var_share": zero_variance_share(penalized),
            "sequences": len(seqs),
            **{k: float(v) for k, v in stats.items()},
            "staleness_mean": sum(ages) / len(ages) if ages else 0.0,
            "stale_groups": len(stale),
            "clip_frac_by_staleness": by_staleness,
            # sync: the rollouts; async: waiting for finished groups (both: the trainer had nothing to do)
            "rollout_s": t1 - t0,
            "update_s": t2 - t1,
            "sync_s": sync_s,
            "round_s": now - (self._round_end or t0),
            "engine_busy_s": busy1 - busy0,
            **{f"tasks_{k}": v for k, v in self.sampler.stats().items()},
        }
        self._round_end = now
        return metrics

    async def _sync_groups(self, r: int) -> list[tuple[list[Finished], int]]:
        """The round's groups, rolled out now on the current weights (staleness 0)."""
        plan = self.sampler.plan(self.cfg.grpo.groups_per_round)
        # A group runs on one platform (its advantages compare attempts of the same task and device); with
        # several platforms configured, groups alternate between them across the round and from round to round.
        work = [
            ((tid, j), self.tasks[tid], self._platform(self.tasks[tid], r * len(plan) + g))
            for g, (tid, n) in enumerate(plan)
            for j in range(n)
        ]
        done = await self._rollouts(work, self.policy, f"round {r}")
        groups: dict[str, list[Finished]] = {}
        for f in done:
            groups.setdefault(f.item[0], []).append(f)
        return [(g, 0) for g in groups.values()]

    async def _async_groups(self, r: int) -> tuple[list[tuple[list[Finished], int]], list[list[Finished]]]:
        """The pool's next ``groups_per_round`` finished groups within the staleness bound, with their
        staleness, and those taken past it (rl/group_stream.py ``take_round``)."""
        stream = self._stream or self._open_stream()
        taken, stale = await stream.take_round(
            self.cfg.grpo.groups_per_round,
            self.state.version,
            lambda g: group_version([f.trajectory for f in g.episodes], g.group.version),
            lambda g: not all(f.trajectory.infra_failed for f in g.episodes),
        )
        return [(g.episodes, age) for g, age in taken], [g.episodes for g in stale]

    def _open_stream(self) -> GroupStream:
        """The everlasting pool of the RL phase: its budget is the groups of the rounds still to run."""
        g = self.cfg.grpo.groups_per_round
        blocks: dict[int, list[tuple[str, int]]] = {}

        def start_group(n: int, version: int) -> StartedGroup:
            block = self.state.round + n // g  # groups are planned a round's worth at a time, as in sync
            # a plan may come back short or empty (every task mastered, no probe drawn): the pool then goes on
            # with the block's groups again, or with the RL tasks in turn, rather than stop training
            plan = blocks.setdefault(block, self.sampler.plan(g)) or [
                (self.rl_tasks[n % len(self.rl_tasks)].id, self.sampler.cfg.group_size)
            ]
            tid, attempts = plan[n % len(plan)]
            task = self.tasks[tid]
            plat = self._platform(task, block * len(plan) + n % len(plan))
            return StartedGroup(n, tid, [((tid, n, j), task, plat) for j in range(attempts)], version)

        async def run_episode(item: Any, task: TaskSpec, plat: str) -> Finished:
            (done,) = await run_rollouts(
                self.manager,
                [(item, task, plat)],
                self.policy,
                self.engines,
                1,
                self.cfg.infra_retries,
                self.env_cfg.step_timeout_s,
                task_options=self.task_options,
            )
            return done

        self._stream = GroupStream(
            start_group,
            run_episode,
            lambda: self.state.version,
            concurrency=self.cfg.concurrency,
            lanes=pool_lanes(
                self.cfg.concurrency, self.sampler.cfg.group_size, self.cfg.pool_oversubscription
            ),
            max_staleness=self.cfg.max_staleness,
            per_update=g,
            budget=(self.cfg.grpo.rounds - self.state.round) * g,
        )
        self._stream.start()
        return self._stream

    def _group_sequences(
        self, task: TaskSpec, trajs: list[Trajectory], age: int, penalized: list[torch.Tensor]
    ) -> list[PackedSequence]:
        """A group's training sequences: verifier rewards (the sampler sees them), step-penalised, group
        advantages plus the format term; none for a lone attempt or a group with no advantage."""
        grpo = self.cfg.grpo
        rewards = torch.tensor([t.reward.value for t in trajs], dtype=torch.float32)
        self.sampler.update(task.id, rewards.tolist())
        rewards = step_penalized(
            rewards[None],
            torch.tensor([[len(t.turns) for t in trajs]]),
            torch.tensor([[t.reward.success for t in trajs]]),
            grpo.step_penalty,
        )[0]
        penalized.append(rewards)
        if len(trajs) < 2:
            return []  # nothing to compare a lone attempt with
        adv = group_advantages(rewards[None], normalize_std=grpo.normalize_std)[0]
        invalid = torch.tensor([[sum(turn.action is None for turn in t.turns) for t in trajs]])
        adv = adv + format_advantages(invalid, grpo.invalid_action_penalty)[0]
        if not bool(adv.abs().gt(0).any()):
            return []  # no gradient at all
        k = grpo.normalizer_steps or task.max_steps
        out: list[PackedSequence] = []
        for t, a in zip(trajs, adv.tolist(), strict=True):
            for s in pack(t, self.policy.history, a, uncredited_steps(t, a, grpo.credit)):
                s = (
                    step_scales(s, len(t.turns), grpo.step_normalizer, k)
                    if grpo.step_normalizer != "none"
                    else s
                )
                out.append(replace(s, staleness=age) if age else s)
        return out

    async def _engine_busy(self) -> float:
        """Seconds the engines have had a request in flight, on average over the engines (0 without any)."""
        if not self.engines:
            return 0.0
        busy = await asyncio.gather(*(e.busy_seconds.remote() for e in self.engines))
        return float(sum(busy)) / len(busy)

    async def sft(self) -> dict[str, float]:
        """Replays the training tasks' golden solutions through the harness and trains on them (SFT)."""
        assert self.trainer is not None
        demo = replace(self.policy, kind="demo")
        demo_tasks = self.train_tasks[: self.cfg.sft.tasks] if self.cfg.sft.tasks else self.train_tasks
        work = [
            ((t.id, j), t, self._platform(t, j))
            for t in demo_tasks
            for j in range(self.cfg.sft.demos_per_task)
        ]
        done = await self._rollouts(work, demo, "demos")
        demos = [f.trajectory for f in done if f.trajectory.reward.success and not f.trajectory.infra_failed]
        # Rollouts finish in any order; sorting makes the warm-up's batches a function of the seed alone (its
        # result still varies a little: CPU float reductions differ from run to run).
        demos.sort(key=lambda t: (t.task_id, t.platform))
        self._store("sft", [f.trajectory for f in done])
        seqs = [s for t in demos for s in pack(t, self.policy.history, 1.0)]
        rng = random.Random(self.cfg.seed)
        size = self.cfg.sft.batch_size or len(seqs)
        stats: dict[str, float] = {}
        sft = self.cfg.sft
        bar = tqdm(range(sft.steps), desc="SFT", unit="step")
        async with self._engines_asleep():
            for step in bar:
                batch = rng.sample(seqs, size) if size < len(seqs) else seqs
                self.trainer.set_lr(sft.lr * lr_factor(step, sft.steps, sft.warmup_steps, sft.schedule))
                stats = self.trainer.update(batch, objective="sft")
                bar.set_postfix(nll=f"{stats['loss']:.3f}")
        self.trainer.set_lr(self.trainer_cfg.lr)
        if self.cfg.grpo.reference_model:
            self.trainer.freeze_reference()
        sync_s = await self._broadcast()
        out = {
            "demos": float(len(demos)),
            "demo_failures": float(len(done) - len(demos)),
            "sync_s": sync_s,
            "sft_loss": stats.get("loss", 0.0),
        }
        self._log({"phase": "sft", **out})
        return out

    async def evaluate(self, label: str) -> float | None:
        """Held-out success rate of the current policy (infra-failed episodes excluded, and reported; None
        when no episode was scored)."""
        policy = replace(
            self.policy, sampling=replace(self.policy.sampling, temperature=self.cfg.heldout.temperature)
        )
        work = [
            ((t.id, j), t, self._platform(t, j))
            for t in self.test_tasks
            for j in range(self._heldout_episodes(label))
        ]
        done = await self._rollouts(work, policy, f"held-out {label}")
        self._store(f"eval-{label}", [f.trajectory for f in done])
        scored = [f.trajectory for f in done if not f.trajectory.infra_failed]
        heldout = rate(sum(t.reward.success for t in scored), len(scored))
        steps = sum(len(t.turns) for t in scored) / len(scored) if scored else None
        if steps is not None:
            self.state.heldout_steps[label] = steps
        self._log(
            {
                "phase": f"eval-{label}",
                "heldout_success": heldout,
                "heldout_mean_steps": steps,
                "infra_failed": len(done) - len(scored),
            }
        )
        return heldout

    # -- pieces -------------------------------------------------------------------------------------------
    def _heldout_episodes(self, label: str) -> int:
        heldout = self.cfg.heldout
        if label == "before" and heldout.before_episodes_per_task:
            return heldout.before_episodes_per_task
        return heldout.episodes_per_task

    def _update(self, seqs: list[PackedSequence]) -> dict[str, float]:
        """``epochs`` passes of ``updates_per_round`` optimizer steps over mini-batches of whole episodes;
        stats averaged over the steps (tokens and seconds summed)."""
        assert self.trainer is not None
        if self.trainer_cfg.old_logprobs == "round" or self.trainer_cfg.correction == "decoupled":
            # before any pass moves the weights: those that sampled the round (sync), or the proximal policy
            # of the decoupled correction, which keeps the engine's logprobs as the behaviour's (async)
            seqs = self.trainer.logprobs(seqs)
        episodes = sorted({s.episode_id for s in seqs})
        n = max(1, min(self.cfg.grpo.updates_per_round, len(episodes)))
        parts = [set(episodes[i::n]) for i in range(n)]
        steps = n * max(1, self.cfg.grpo.epochs)
        out: dict[str, float] = {}
        for _ in range(max(1, self.cfg.grpo.epochs)):
            for part in parts:
                stats = self.trainer.update([s for s in seqs if s.episode_id in part])
                for k, v in stats.items():
                    if k == "grammar_mismatches":  # a running count: the last one is the round's
                        out[k] = v
                    else:
                        summed = k in ("tokens", "update_s") or k.startswith(("clipped_s", "trained_s"))
                        out[k] = out.get(k, 0.0) + (v if summed else v / steps)
        return out

    def _platform(self, task: TaskSpec, j: int) -> str:
        options = [p for p in self.platforms if p in task.platforms] or self.platforms
        return options[j % len(options)]

    async def _rollouts(
        self, work: list[tuple[Any, TaskSpec, str]], policy: PolicyConfig, what: str
    ) -> list[Finished]:
        bar = tqdm(total=len(work), desc=what, unit="ep", leave=False)
        done = await run_rollouts(
            self.manager,
            work,
            policy,
            self.engines,
            self.cfg.concurrency,
            self.cfg.infra_retries,
            self.env_cfg.step_timeout_s,
            on_finished=lambda f: bar.update(1),
            task_options=self.task_options,
        )
        bar.close()
        return done

    def _store(self, name: str, trajs: list[Trajectory]) -> None:
        path = self.run_dir / "trajectories" / name
        if path.exists():  # a resumed run redoes work its last checkpoint did not cover
            shutil.rmtree(path)
        write_all(path, trajs)

    @asynccontextmanager
    async def _engines_asleep(self) -> AsyncIterator[None]:
        """Colocated mode: the engines release their GPU memory for the train step inside and wake after it,
        before the weight sync that follows (as verl does). Disaggregated: nothing happens."""
        if not self.colocated:
            yield
            return
        await asyncio.gather(*(e.sleep.remote() for e in self.engines))
        try:
            yield
        finally:
            await asyncio.gather(*(e.wake_up.remote() for e in self.engines))

    async def _broadcast(self) -> float:
        """The next version of the trainer's weights to every engine, checked (rl/weight_publisher.py);
        returns seconds."""
        self.state.version += 1
        return await self.publisher.publish(self.trainer, self.state.version)

    def _advance(self, phase: str, seconds: float) -> None:
        self.state.phase = phase
        self.state.seconds = seconds
        self._checkpoint()

    # -- lifecycle, checkpoints, logging ----------------------------------------------------------------
    async def _start(self) -> None:
        if self.manager is None or self.trainer is None:
            raise ValueError("the driver needs its roles: manager, engines and trainer (runtime/session.py)")
        torch.manual_seed(self.cfg.seed)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        await self.publisher.join(self.trainer)
        if self.cfg.resume and await asyncio.to_thread(self._load_checkpoint):
            await self._broadcast()  # the engines start from the base model: give them the checkpoint's
        self._init_wandb()

    async def _close_stream(self) -> None:
        """Stops the async pool. After the last round nothing is in flight (its budget was the rounds'
        groups); after a failure the episodes in flight are not recorded, and a resumed run redoes them."""
        if self._stream is not None:
            await self._stream.close()
            self._stream = None

    async def _stop(self) -> None:
        # The session that brought the roles up tears them down (runtime/session.py).
        if self._wandb is not None:
            self._wandb.finish()

    def _checkpoint(self) -> None:
        """Writes ``checkpoints/ckpt-NNNNN`` (weights, optimizer, reference, state), seals it (every file
        fsynced, then a manifest of sizes) and then points ``checkpoints/latest`` at it (durably), so a crash
        never leaves a half checkpoint that resume would load."""
        assert self.trainer is not None
        self.state.sampler = self.sampler.state_dict()
        root = self.run_dir / "checkpoints"
        n = len(self.state.history) + PHASES.index(self.state.phase)
        path = root / f"ckpt-{n:05d}-{uuid.uuid4().hex[:6]}"
        path.mkdir(parents=True)
        self.trainer.save(path / "trainer")
        (path / "state.json").write_text(json.dumps(asdict(self.state)))
        seal(path)
        atomic_write_text(root / "latest", path.name)
        older = sorted((p for p in root.glob("ckpt-*") if p != path), key=lambda p: p.stat().st_mtime)
        for old in older[: max(0, len(older) - (self.cfg.keep_checkpoints - 1))]:
            shutil.rmtree(old, ignore_errors=True)

    def _load_checkpoint(self) -> bool:
        assert self.trainer is not None
        path = sealed_checkpoint(self.run_dir / "checkpoints")
        if path is None:
            return False
        self.trainer.load(path / "trainer")
        self.state = RunState(**json.loads((path / "state.json").read_text()))
        self.state.version -= 1  # the broadcast that follows the load advances it back
        self.sampler.load_state_dict(self.state.sampler)
        # Loading the optimizer also restores the learning rate it was saved with. The configured RL rate
        # wins (the SFT warm-up sets its own each step), so a run resumed with a new ``trainer.lr`` uses it.
        self.trainer.set_lr(self.trainer_cfg.lr)
        return True

    def _init_wandb(self) -> None:
        if self.wandb_mode == "disabled":
            return
        import wandb

        self.state.wandb_id = self.state.wandb_id or uuid.uuid4().hex[:12]
        self._wandb = wandb.init(
            project=self.wandb_project,
            id=self.state.wandb_id,
            resume="allow",
            mode=self.wandb_mode,
            dir=str(self.run_dir),
            config={"driver": asdict(self.cfg), "trainer": asdict(self.trainer_cfg)},
        )

    def _log(self, metrics: dict[str, Any]) -> None:
        if "round" in metrics:
            self.state.history.append(metrics)
        with (self.run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(metrics) + "\n")
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in metrics.items() if isinstance(v, int | float)})

    def _report(self) -> dict[str, Any]:
        h = self.state.heldout
        return {
            "heldout_success_before": h.get("before"),
            "heldout_success_sft": h.get("sft"),
            "heldout_success_rl": h.get("rl"),
            "heldout_mean_steps_before": self.state.heldout_steps.get("before"),
            "heldout_mean_steps_sft": self.state.heldout_steps.get("sft"),
            "heldout_mean_steps_rl": self.state.heldout_steps.get("rl"),
            "rounds": self.state.round,
            "seconds": self.state.seconds,
            "train_tasks": len(self.train_tasks),
            "rl_tasks": len(self.rl_tasks),
            "heldout_tasks": len(self.test_tasks),
            "heldout_episodes_per_task": self.cfg.heldout.episodes_per_task,
            "heldout_episodes_per_task_before": self._heldout_episodes("before"),
            "policy_version": self.state.version,
            "history": self.state.history,
        }
