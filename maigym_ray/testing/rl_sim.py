"""RLSim: synchronous against asynchronous GRPO at cluster scale, on simulated time, with the driver's own
scheduler.

The rollout pool is :class:`maigym_ray.rl.group_stream.GroupStream`, the one ``driver.mode=async`` runs, and
the trainer takes its groups with the same ``take_round`` (the staleness rule of rl/staleness.py). They run on a
:class:`~maigym_ray.testing.virtual_time.VirtualTimeLoop`, against costs that stand in for environments, engines
and the trainer (:class:`SimCosts`: each cost is stated there with where it comes from). Synchronous training
is the same pool at ``max_staleness=0``: a round's groups start only once the previous update's weights are
published, and the round trains only when all of them have finished, so the trainer and the engines take
turns exactly as in ``driver.mode=sync``.

What it measures, over the simulated run: the GPU idle share (trainer GPUs idle outside their updates and
weight syncs; engine GPUs idle for the share of their capacity no request used), episodes per hour, the
groups' staleness and the groups past the bound.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass, field
from typing import Any

from maigym_ray.errors import ConfigError
from maigym_ray.rl.group_stream import FinishedGroup, GroupStream, StartedGroup, pool_lanes
from maigym_ray.testing.virtual_time import run_virtual


@dataclass
class SimCosts:
    """What each part costs, per platform where it differs. Environment resets are the reference's own
    (6 s browser, 37 s desktop, 165 s Android: the issue's cited figures); the rest are stated assumptions for
    a 9B model on H100s."""

    #: share of episodes per platform (as benchmarks/scale_sim.py's fleet).
    mix: dict[str, float] = field(default_factory=lambda: {"web": 0.60, "desktop": 0.25, "android": 0.15})
    #: median seconds of an episode's reset, per platform (lognormal, ``sigma``).
    reset_s: dict[str, float] = field(default_factory=lambda: {"web": 6.0, "desktop": 37.0, "android": 165.0})
    #: median seconds of one environment step (action + observation), per platform (lognormal, ``sigma``).
    step_s: dict[str, float] = field(default_factory=lambda: {"web": 1.0, "desktop": 2.0, "android": 3.0})
    #: the lognormal spread of resets and steps (0.3: one reset in a hundred takes twice the median).
    sigma: float = 0.3
    #: turns per episode, uniform.
    turns: tuple[int, int] = (3, 15)
    #: generated tokens per turn, and prompt tokens per turn the prefix cache does not hold (window-wise
    #: history: about 4,000-token prompts at the 0.87 hit rate measured here, benchmarks/prefix_cache.py).
    decode_tokens: int = 60
    prefill_tokens: int = 500
    #: one engine GPU's throughput on a 9B model in bf16, batched: decode and prefill tokens per second.
    decode_tok_s_per_gpu: float = 2000.0
    prefill_tok_s_per_gpu: float = 20000.0
    #: one request's decode speed when the engines are not saturated (tokens per second).
    decode_tok_s_per_request: float = 40.0
    #: training FLOPs per token (6 N for N = 9e9 parameters) and a trainer GPU's sustained FLOP/s
    #: (989 TFLOP/s bf16 dense at 40 % MFU).
    train_flops_per_token: float = 6 * 9e9
    trainer_flops_per_gpu: float = 989e12 * 0.40
    #: tokens trained per episode: window-wise packing trains each window once (3 windows of ~4,500 tokens at
    #: 9 turns), so per turn.
    train_tokens_per_turn: float = 1500.0
    #: seconds to broadcast 9B bf16 weights (18 GB) from the trainer to the engines.
    sync_s: float = 3.0


@dataclass
class SimRun:
    """One arm's shape."""

    #: trainer GPUs (the rest of ``gpus`` serve the engines).
    trainer_gpus: int
    gpus: int = 512
    environments: int = 20000
    #: groups per policy update and attempts per group.
    groups_per_update: int = 1024
    group_size: int = 8
    #: policy updates measured, after ``warmup`` updates that fill the pool (not measured).
    updates: int = 6
    warmup: int = 1
    #: 0 = synchronous.
    max_staleness: int = 2
    pool_oversubscription: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.trainer_gpus < self.gpus:
            raise ConfigError(f"trainer_gpus={self.trainer_gpus}: need 0 < trainer_gpus < gpus={self.gpus}")


@dataclass
class SimReport:
    """An arm's figures."""

    sim_s: float
    gpu_idle_share: float
    trainer_idle_share: float
    engine_idle_share: float
    episodes: int
    episodes_per_hour: float
    mean_staleness: float
    stale_groups: int
    groups_taken: int


class RLSim:
    """See the module docstring."""

    def __init__(self, run: SimRun, costs: SimCosts | None = None) -> None:
        self.run_cfg, self.costs = run, costs or SimCosts()
        self.rng = random.Random(run.seed)
        self.engine_gpus = run.gpus - run.trainer_gpus
        self.generating = 0  # requests in flight on the engines
        self.engine_gpu_s = 0.0  # engine GPU-seconds of work done
        self.trainer_busy_s = 0.0
        self.version = 0
        self.episodes = 0

    def run(self) -> SimReport:
        """Runs ``updates`` policy updates; returns the figures."""
        return run_virtual(self._main())

    async def _main(self) -> SimReport:
        r, c = self.run_cfg, self.costs
        platforms = list(c.mix)
        weights = [c.mix[p] for p in platforms]

        def start_group(n: int, version: int) -> StartedGroup:
            plat = self.rng.choices(platforms, weights)[0]
            return StartedGroup(n, f"task-{n}", [((n, j), None, plat) for j in range(r.group_size)], version)

        stream = GroupStream(
            start_group,
            self._episode,
            lambda: self.version,
            concurrency=r.environments,
            lanes=pool_lanes(r.environments, r.group_size, r.pool_oversubscription),
            max_staleness=r.max_staleness,
            per_update=r.groups_per_update,
            # an everlasting pool: the run stops after its updates with groups still in flight, and measures the
            # steady state between the end of the warm-up and the last update (no fill, no drain)
            budget=4 * (r.warmup + r.updates) * r.groups_per_update,
        )
        loop = asyncio.get_running_loop()
        stream.start()
        ages: list[int] = []
        stale = 0
        start = (0.0, 0.0, 0.0, 0)
        try:
            for u in range(r.warmup + r.updates):
                if u == r.warmup:
                    start = (loop.time(), self.trainer_busy_s, self.engine_gpu_s, self.episodes)
                taken, past = await stream.take_round(
                    r.groups_per_update, self.version, lambda g: g.group.version, lambda g: True
                )
                if u >= r.warmup:
                    stale += len(past)
                    ages += [age for _, age in taken]
                t0 = loop.time()
                await asyncio.sleep(self._update_s(taken))
                await asyncio.sleep(c.sync_s)
                self.trainer_busy_s += loop.time() - t0
                self.version += 1
                await stream.advanced()
        finally:
            await stream.close()
        wall = loop.time() - start[0]
        trainer_idle = 1.0 - (self.trainer_busy_s - start[1]) / wall
        engine_idle = 1.0 - (self.engine_gpu_s - start[2]) / (self.engine_gpus * wall)
        gpu_idle = (r.trainer_gpus * trainer_idle + self.engine_gpus * engine_idle) / r.gpus
        episodes = self.episodes - start[3]
        return SimReport(
            wall,
            gpu_idle,
            trainer_idle,
            engine_idle,
            episodes,
            episodes * 3600.0 / wall,
            sum(ages) / len(ages) if ages else 0.0,
            stale,
            len(ages) + stale,
        )

    def _update_s(self, taken: list[tuple[FinishedGroup, int]]) -> float:
        c = self.costs
        turns = sum(e for g, _ in taken for e in g.episodes)
        flops = turns * c.train_tokens_per_turn * c.train_flops_per_token
        return flops / (self.run_cfg.trainer_gpus * c.trainer_flops_per_gpu)

    def _lognormal(self, median: float) -> float:
        return median * math.exp(self.rng.gauss(0.0, self.costs.sigma))

    async def _episode(self, item: Any, task: Any, platform: str) -> int:
        """One episode: its reset, then turns of generation and environment step; returns its turns."""
        c = self.costs
        await asyncio.sleep(self._lognormal(c.reset_s[platform]))
        turns = self.rng.randint(*c.turns)
        gpu_s = c.decode_tokens / c.decode_tok_s_per_gpu + c.prefill_tokens / c.prefill_tok_s_per_gpu
        for _ in range(turns):
            # processor sharing: the engines' GPU-seconds of work in flight, spread over their GPUs
            self.generating += 1
            alone = c.decode_tokens / c.decode_tok_s_per_request + c.prefill_tokens / c.prefill_tok_s_per_gpu
            await asyncio.sleep(max(alone, self.generating * gpu_s / self.engine_gpus))
            self.generating -= 1
            self.engine_gpu_s += gpu_s
            await asyncio.sleep(self._lognormal(c.step_s[platform]))
        self.episodes += 1
        return turns
