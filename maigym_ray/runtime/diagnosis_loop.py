"""The diagnosis loop over rounds, with a control arm: evaluate → cluster the failures by app, screen and action
→ synthesise tasks aimed at the weakest clusters → train on them, and again.

Tasks are the single-action tasks derived from app specs (synth/spec_tasks.py); synth/targeting.py gives each
its (app, screen, action) cluster and splits every cluster into held-out tasks, base tasks and a reservoir.

- **Base round.** The training job's own driver (rl/driver.py) runs SFT on the base tasks' golden solutions
  (replayed live through the harness) and evaluates the held-out tasks before and after. Both arms start from
  this checkpoint.
- **Round r, targeted arm.** The last held-out eval's failures are clustered; the ``weakest`` clusters get
  ``new_tasks`` tasks from their reservoirs.
- **Round r, control arm.** The same number of new tasks, drawn at random from every cluster's reservoir.
- In both arms each new task is validated on a live instance (initial state scores 0, the golden solution
  scores 1, a reset restores the state hash: synth/validation.py) before it is kept, and a rejected one is
  replaced from the same draw. The driver then resumes the arm's last checkpoint, runs ``round_sft_steps`` SFT
  steps on the round's new tasks, and evaluates the held-out tasks again (greedy, one episode per task).

Both arms run on one set of live roles (envs, engine, trainer group), one after the other, so they share every
setting but the draw. Each round's run directory is an ordinary training run directory (report.json,
trajectories, checkpoints); ``diagnosis_loop.json`` in ``root`` holds the rounds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from maigym_ray.apps.registry import APP_CLASSES, NOVEL_APPS, SPEC_APPS
from maigym_ray.durable import atomic_write_text, seal
from maigym_ray.errors import ConfigError
from maigym_ray.rl.driver import RunState, sealed_checkpoint
from maigym_ray.runtime.schema import TrainConfig
from maigym_ray.synth.spec_tasks import single_action_tasks
from maigym_ray.synth.targeting import (
    STAGES,
    Cluster,
    ClusterOutcome,
    Partition,
    cluster_of,
    cluster_outcomes,
    draw_random,
    draw_targeted,
    partition,
    success_on,
    weakest_clusters,
    went_wrong_at,
)
from maigym_ray.tasks.pool import task_from_dict
from maigym_ray.types import TaskSpec

log = logging.getLogger(__name__)

#: the two arms, in the order they run
ARMS = ("targeted", "control")


@dataclass
class DiagnosisLoopConfig:
    """The loop's own settings; the model, trainer, envs and policy come from the training job's config."""

    #: spec apps whose single-action tasks make the clusters ([] = every spec app outside the novel split: the
    #: novel apps are never trained on).
    apps: list[str] = field(default_factory=list)
    #: records per action derived per app: the candidate tasks of each cluster.
    per_action: int = 20
    #: held-out tasks per cluster.
    heldout_per_cluster: int = 3
    #: base training tasks per cluster (the base round's SFT set).
    base_per_cluster: int = 2
    #: a cluster takes part only with at least this many reservoir tasks left after the held-out and base ones.
    min_reservoir: int = 4
    #: rounds after the base round.
    rounds: int = 3
    #: new tasks per round, in each arm.
    new_tasks: int = 6
    #: clusters the targeted arm aims at in each round.
    weakest: int = 2
    #: SFT steps of the base round (over all base tasks, ``driver.sft.batch_size`` a step).
    base_sft_steps: int = 10
    #: SFT steps of every later round (each over all of the round's new tasks).
    round_sft_steps: int = 3
    #: seeds the clusters' split and the control arm's draws.
    seed: int = 0
    #: evaluate the held-out tasks before the base round's SFT too (a pretrained model that has not learnt the
    #: action format yet runs every episode to its step cap: the costliest eval, and no figure of the loop's).
    eval_before: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.apps) - set(SPEC_APPS))
        if unknown:
            raise ConfigError(f"diagnosis loop apps {unknown}: not spec apps (choose from {list(SPEC_APPS)})")
        for name in ("per_action", "rounds", "new_tasks", "weakest", "base_sft_steps", "round_sft_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"diagnosis loop {name}={getattr(self, name)}: need >= 1")

    def app_list(self) -> list[str]:
        """The apps the clusters come from."""
        return list(self.apps) or [a for a in SPEC_APPS if a not in NOVEL_APPS]


def candidate_tasks(loop: DiagnosisLoopConfig) -> list[TaskSpec]:
    """Every single-action task derived from the loop's apps' specs."""
    out = []
    for app in loop.app_list():
        cls = APP_CLASSES[app]
        for row in single_action_tasks(cls.SPEC, cls().state(), loop.per_action):
            out.append(task_from_dict(row, f"{app} spec task {row['id']}"))
    return out


def eval_rows(run_dir: Path, label: str) -> list[dict[str, Any]]:
    """The episodes of a run's held-out eval ``label``: task_id, success, infra_failed, num_steps and
    ``actions`` (each turn's reply as the policy wrote it)."""
    files = sorted((run_dir / "trajectories" / f"eval-{label}").glob("*.parquet"))
    cols = ["task_id", "success", "infra_failed", "num_steps", "turns"]
    rows = [r for p in files for r in pq.read_table(p, columns=cols).to_pylist()]
    for r in rows:
        r["actions"] = [t["action_text"] or t.get("response_text", "") for t in r.pop("turns") or []]
    return rows


def failure_stages(rows: list[dict[str, Any]], tasks: dict[str, TaskSpec]) -> dict[str, int]:
    """Failed held-out episodes by the stage at which they left the golden path (synth/targeting.py)."""
    out = Counter(
        went_wrong_at(tasks[r["task_id"]], r["actions"])
        for r in rows
        if not r["success"] and not r.get("infra_failed") and r["task_id"] in tasks
    )
    return {k: out.get(k, 0) for k in STAGES}


def fork_checkpoint(src: Path, dst: Path) -> None:
    """``dst`` becomes a run directory whose one checkpoint holds ``src``'s latest weights, optimizer and
    policy version at phase "before", so that the driver's resume there runs SFT and the held-out eval on the
    tasks it is given. The tensors are hard links (a checkpoint is never written in place); the state is
    written anew and the copy sealed again."""
    ckpt = sealed_checkpoint(src / "checkpoints")
    if ckpt is None:
        raise FileNotFoundError(f"{src} has no sealed checkpoint to continue from")
    if dst.exists():
        shutil.rmtree(dst)
    copy = dst / "checkpoints" / ckpt.name
    shutil.copytree(ckpt, copy, copy_function=_link)
    old = RunState(**json.loads((ckpt / "state.json").read_text()))
    state = RunState(phase="before", version=old.version, sampler=old.sampler)
    (copy / "state.json").unlink()  # a link to src's file: replace it, never write through it
    (copy / "state.json").write_text(json.dumps(asdict(state)))
    seal(copy)
    atomic_write_text(dst / "checkpoints" / "latest", copy.name)


def _link(src: str, dst: str) -> None:
    try:
        Path(dst).hardlink_to(src)
    except OSError:  # another file system: copy
        shutil.copy2(src, dst)


@dataclass
class ArmState:
    """One arm's progress."""

    name: str
    reservoir: dict[Cluster, list[TaskSpec]]
    run_dir: Path
    outcomes: dict[Cluster, ClusterOutcome]


class DiagnosisLoop:
    """Runs the loop of ``loop`` on the training job ``cfg`` in ``root`` (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, loop: DiagnosisLoopConfig, root: Path) -> None:
        self.cfg, self.loop, self.root = cfg, loop, Path(root)
        self.rejected: Counter[str] = Counter()
        self.roles: Any = None

    def run(self) -> dict[str, Any]:
        """The whole loop; returns (and writes to ``root/diagnosis_loop.json``) its figures."""
        from maigym_ray.runtime.session import Session

        self.root.mkdir(parents=True, exist_ok=True)
        part = partition(
            candidate_tasks(self.loop),
            self.loop.heldout_per_cluster,
            self.loop.base_per_cluster,
            self.loop.min_reservoir,
            self.loop.seed,
        )
        if len(part.clusters) < self.loop.weakest + 1:
            raise ConfigError(
                f"the diagnosis loop found {len(part.clusters)} clusters with enough tasks in {self.loop.app_list()};"
                f" it needs more than weakest={self.loop.weakest} (lower min_reservoir or add apps)"
            )
        c = self.cfg
        session = Session(c.ray, c.env, c.policy, c.topology, trains=True)
        session.init_ray()
        try:
            return asyncio.run(self._run(session, part))
        finally:
            session.shutdown_ray()

    async def _run(self, session: Any, part: Partition) -> dict[str, Any]:
        from maigym_ray.runtime.training import start_roles

        t0 = time.perf_counter()
        everything = [*part.heldout, *part.base, *(t for ts in part.reservoir.values() for t in ts)]
        try:
            self.roles = await start_roles(session, self.cfg, everything)
            heldout = await self._validated(part.heldout)
            base = await self._validated(part.base)
            base_dir = self.root / "base"
            base_report = await self._train(base_dir, base, heldout, self.loop.base_sft_steps, resume=False)
            tasks = {t.id: t for t in heldout}
            base_rows = eval_rows(base_dir, "sft")
            start = cluster_outcomes(base_rows, tasks)
            base_report["failed_at"] = failure_stages(base_rows, tasks)
            rounds: list[dict[str, Any]] = [{} for _ in range(self.loop.rounds)]
            for arm in ARMS:
                state = ArmState(arm, {k: list(v) for k, v in part.reservoir.items()}, base_dir, start)
                rng = random.Random(self.loop.seed)
                for r in range(self.loop.rounds):
                    rounds[r][arm] = await self._round(state, r, heldout, tasks, rng, rounds[r])
        finally:
            await session.stop()
        out = self._figures(part, heldout, base_report, start, rounds, time.perf_counter() - t0)
        atomic_write_text(self.root / "diagnosis_loop.json", json.dumps(out, indent=2))
        return out

    async def _round(
        self,
        arm: ArmState,
        r: int,
        heldout: list[TaskSpec],
        tasks: dict[str, TaskSpec],
        rng: random.Random,
        this_round: dict[str, Any],
    ) -> dict[str, Any]:
        """One round of one arm: draw, validate, train, evaluate; returns its record."""
        available = {k: len(v) for k, v in arm.reservoir.items()}
        # Only the targeted arm diagnoses; both arms are scored on the clusters it aimed at this round.
        aimed = (
            weakest_clusters(arm.outcomes, self.loop.weakest, available)
            if arm.name == "targeted"
            else [tuple(c) for c in this_round["targeted"]["clusters"]]
        )
        new: list[TaskSpec] = []
        while len(new) < self.loop.new_tasks:
            want = self.loop.new_tasks - len(new)
            if arm.name == "targeted":
                drawn = draw_targeted(arm.reservoir, aimed, want)
            else:
                drawn = draw_random(arm.reservoir, want, rng)
            if not drawn:
                break  # the reservoirs ran out: the round trains on fewer tasks, and says so
            new += await self._validated(drawn)
        before = success_on(arm.outcomes, aimed)
        overall_before = success_on(arm.outcomes, list(arm.outcomes))
        run_dir = self.root / arm.name / f"round-{r + 1}"
        fork_checkpoint(arm.run_dir, run_dir)
        report = await self._train(run_dir, new, heldout, self.loop.round_sft_steps, resume=True)
        rows = eval_rows(run_dir, "sft")
        arm.outcomes = cluster_outcomes(rows, tasks)
        arm.run_dir = run_dir
        return {
            "clusters": [list(c) for c in aimed],
            "new_tasks": len(new),
            "new_by_cluster": dict(Counter("/".join(cluster_of(t)) for t in new)),
            "new_task_ids": [t.id for t in new],
            "targeted_clusters_before": before,
            "targeted_clusters_after": success_on(arm.outcomes, aimed),
            "overall_before": overall_before,
            "overall_after": report.get("heldout_success_sft"),
            "mean_steps_after": report.get("heldout_mean_steps_sft"),
            "failed_at": failure_stages(rows, tasks),
            "seconds": report.get("seconds"),
        }

    async def _train(
        self, run_dir: Path, train: list[TaskSpec], heldout: list[TaskSpec], steps: int, resume: bool
    ) -> dict[str, Any]:
        """One training run of the job's driver over the live roles: SFT for ``steps`` on ``train``'s golden
        solutions, then the held-out eval (and, on a fresh start, the eval before it)."""
        from maigym_ray.rl.driver import Driver
        from maigym_ray.rl.driver_config import TaskSplit
        from maigym_ray.runtime.training import job_config

        if not train:
            raise ConfigError(f"{run_dir.name}: no validated task to train on")
        d = self.cfg.driver
        sft = replace(d.sft, steps=steps, tasks=0)
        if resume:  # a few steps that continue training: the rate of the base round's end, no warm-up
            sft = replace(sft, warmup_steps=0, schedule="constant", batch_size=0)
        driver_cfg = replace(
            d,
            sft=sft,
            grpo=replace(d.grpo, rounds=0),
            heldout=replace(
                d.heldout,
                episodes_per_task=1,
                before_episodes_per_task=1,
                temperature=0.0,
                before=self.loop.eval_before,
            ),
            resume=resume,
            seed=self.loop.seed,
        )
        cfg = replace(self.cfg, driver=driver_cfg)
        driver = Driver(job_config(cfg, run_dir), TaskSplit(train=train, heldout=heldout), self.roles)
        return await driver.run()

    async def _validated(self, tasks: list[TaskSpec]) -> list[TaskSpec]:
        """The tasks of ``tasks`` that pass live validation on the loop's own envs; the rest counted by reason."""
        from maigym_ray.runtime.synthesis import validate_on

        concurrency = min(4, self.cfg.driver.concurrency)
        verdicts = await validate_on(self.roles.manager, tasks, concurrency, desc="validate new tasks")
        ok = {v.task_id for v in verdicts if v.ok}
        for v in verdicts:
            if not v.ok:
                self.rejected[v.reason] += 1
                log.warning("diagnosis loop: %s rejected (%s: %s)", v.task_id, v.reason, v.detail)
        return [t for t in tasks if t.id in ok]

    def _figures(
        self,
        part: Partition,
        heldout: list[TaskSpec],
        base: dict[str, Any],
        start: dict[Cluster, ClusterOutcome],
        rounds: list[dict[str, Any]],
        wall_s: float,
    ) -> dict[str, Any]:
        aimed = sorted({tuple(c) for rd in rounds for c in rd["targeted"]["clusters"]})
        last = self.loop.rounds
        final = {
            arm: cluster_outcomes(
                eval_rows(self.root / arm / f"round-{last}", "sft"), {t.id: t for t in heldout}
            )
            for arm in ARMS
        }
        return {
            "config": asdict(self.loop),
            "model": self.cfg.policy.engine.model,
            "clusters": ["/".join(c) for c in part.clusters],
            "heldout_tasks": len(heldout),
            "base_tasks": len(part.base),
            "base": {
                "before": base.get("heldout_success_before"),
                "after_sft": base.get("heldout_success_sft"),
                "by_cluster": {"/".join(k): o.success_rate for k, o in sorted(start.items())},
                "failed_at": base.get("failed_at"),
            },
            "rounds": [
                {
                    "round": i + 1,
                    "targeted_clusters": rd["targeted"]["clusters"],
                    # held-out success on the clusters the targeted arm aimed at this round, of each arm
                    "targeted_success": rd["targeted"]["targeted_clusters_after"],
                    "control_success": rd["control"]["targeted_clusters_after"],
                    # and over every held-out task
                    "targeted_overall": rd["targeted"]["overall_after"],
                    "control_overall": rd["control"]["overall_after"],
                    "targeted": rd["targeted"],
                    "control": rd["control"],
                }
                for i, rd in enumerate(rounds)
            ],
            # the rounds again as flat figures (docs/benchmarks.md renders dicts, not lists of them)
            "by_round": {
                str(i + 1): {
                    "aimed": ", ".join("/".join(c) for c in rd["targeted"]["clusters"]),
                    **{f"{arm}_arm_on_aimed": rd[arm]["targeted_clusters_after"] for arm in ARMS},
                    **{f"{arm}_arm_overall": rd[arm]["overall_after"] for arm in ARMS},
                }
                for i, rd in enumerate(rounds)
            },
            "all_targeted_clusters": ["/".join(c) for c in aimed],
            "final_on_all_targeted": {arm: success_on(final[arm], aimed) for arm in ARMS},
            "rejected_by_reason": dict(self.rejected),
            "wall_s": round(wall_s, 1),
        }
