"""Task pools of a run: the explicit synthesis stage, then loading.

A ``tasks.pool`` of "synth:<templates>" names a pool that does not exist yet. :func:`synthesis_stage` makes it
(synthesised and validated live into ``<run dir>/pool``, reused by a resumed run) and returns the TasksConfig
that points at the file; :func:`load_tasks` only ever loads, so loading never starts Ray or a browser behind
the caller's back.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from maigym_ray.apps.registry import NOVEL_APPS
from maigym_ray.config import EnvManagerConfig, PoolConfig, RayConfig
from maigym_ray.errors import ConfigError
from maigym_ray.runtime.schema import TasksConfig
from maigym_ray.runtime.topology import TopologyConfig
from maigym_ray.tasks.curriculum import curriculum_tasks
from maigym_ray.tasks.families import FAMILIES, FAMILIES_PREFIX, family_names, family_tasks
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.types import PLATFORMS

SYNTH_PREFIX = "synth:"

#: Outside suites whose tasks need a backend kind of their own, by pool-spec prefix: (the kind a configured
#: pool runs, the suite's kind). ``tasks.pool=miniwob:...`` turns the run's ``web`` pools into ``miniwob``
#: pools (same sizes and settings), so the suite runs with any experiment's env config.
SUITE_BACKENDS: dict[str, tuple[str, str]] = {
    "miniwob": ("web", "miniwob"),
    "osworld": ("desktop", "osworld"),
}

#: A suite's own reset, used where the pool has the mocked apps' default ("context": a fresh browser context a
#: reset). MiniWoB++ pages restart their own episodes, as the suite's environment does; a fresh context each
#: episode only costs time for pages that keep no cookies or storage. An explicit "reload" is kept.
SUITE_RESETS: dict[str, str] = {"miniwob": "restart"}


def env_for_pool(env: EnvManagerConfig, pool_spec: str) -> EnvManagerConfig:
    """``env`` with the pools a suite's tasks need (see :data:`SUITE_BACKENDS` and :data:`SUITE_RESETS`);
    other pools as they are."""
    prefix = pool_spec.split(":", 1)[0] if ":" in pool_spec else ""
    if prefix not in SUITE_BACKENDS:
        return env
    base, kind = SUITE_BACKENDS[prefix]
    pools = {n: _suite_pool(p, kind) if p.backend == base else p for n, p in env.pools.items()}
    return replace(env, pools=pools)


def _suite_pool(pool: PoolConfig, kind: str) -> PoolConfig:
    # the suite's kind reads the same settings class as the pool's (web -> miniwob, desktop -> osworld)
    reset = SUITE_RESETS.get(kind)
    options = dict(pool.options)
    if reset and options.get("reset", "context") == "context":
        options["reset"] = reset
    return replace(pool, backend=kind, options=options)


def synthesis_stage(
    cfg: TasksConfig,
    run_dir: Path | None,
    ray_cfg: RayConfig | None = None,
    topology: TopologyConfig | None = None,
) -> TasksConfig:
    """Runs synthesis for a "synth:" pool into ``run_dir/pool`` (its validation envs placed by ``topology``)
    and returns ``cfg`` pointing at the written pool file; any other pool is returned as it is."""
    if not cfg.pool.startswith(SYNTH_PREFIX):
        return cfg
    from maigym_ray.runtime.synthesis import synthesized_pool

    if run_dir is None:
        raise ConfigError(f"tasks.pool={cfg.pool!r} needs a run directory to write the pool to")
    names = cfg.pool.split(":", 1)[1]
    templates = [] if names == "all" else [n for n in names.split(",") if n]
    synthesized_pool(templates, cfg.synth_worlds, run_dir / "pool", ray_cfg or RayConfig(), topology)
    return replace(cfg, pool=str(run_dir / "pool" / "pool.parquet"))


def load_tasks(cfg: TasksConfig) -> TaskPool:
    """The task pool a TasksConfig selects (a "synth:" pool must have gone through :func:`synthesis_stage`)."""
    check_platforms(cfg.platforms)
    chosen = cfg.platforms
    if cfg.pool.startswith(SYNTH_PREFIX):
        raise ConfigError(
            f"tasks.pool={cfg.pool!r} is made by the synthesis stage: run synthesis_stage first"
        )
    if cfg.pool == "builtin":
        pool = TaskPool.builtin()
    elif cfg.pool == "curriculum":
        pool = TaskPool(curriculum_tasks())
    elif cfg.pool.startswith(FAMILIES_PREFIX):
        pool = TaskPool(_families(cfg))
    else:
        pool = TaskPool.load(cfg.pool)
    pool = pool.filter(split=cfg.split or None, apps=cfg.apps or None)
    tasks = [t for t in pool if not chosen or set(t.platforms) & set(chosen)]
    return TaskPool(tasks[: cfg.limit] if cfg.limit else tasks)


def check_platforms(names: list[str] | tuple[str, ...], key: str = "tasks.platforms") -> None:
    """A ConfigError naming the valid platforms when any of ``names`` is unknown."""
    unknown = [p for p in names if p not in PLATFORMS]
    if unknown:
        raise ConfigError(f"{key}: unknown platform(s) {unknown}; valid: {', '.join(PLATFORMS)}")


def route_tasks(cfg: TasksConfig, pool_platforms: list[str]) -> tuple[TaskPool, list[str]]:
    """The tasks a run evaluates on pools of ``pool_platforms``, and what to tell the user before the run.

    ``tasks.platforms`` (or, when empty, every platform a pool serves) selects the tasks; ``tasks.limit``
    applies after that, so ``backends=desktop tasks.limit=2`` runs two desktop tasks. A chosen platform that no
    pool serves, and tasks left out because no pool serves their platforms, are said (one line each). A run
    with nothing to do is a ConfigError that says which backends the tasks need."""
    check_platforms(cfg.platforms)
    served = sorted(set(pool_platforms))
    notes = []
    if unserved := [p for p in cfg.platforms if p not in served]:
        notes.append(
            f"tasks.platforms names {unserved}, which no pool serves (pools: {served}); "
            f"add backends={unserved[0]} to run them"
        )
    wanted = [p for p in (cfg.platforms or served) if p in served]
    everything = list(load_tasks(replace(cfg, platforms=[], limit=0)))
    # counted by the platforms a task runs on ("mobile_web or web"), so the counts add up to the tasks left out
    left_out = Counter(
        " or ".join(sorted(t.platforms)) for t in everything if not set(t.platforms) & set(wanted)
    )
    n_left = sum(left_out.values())
    if not wanted or n_left == len(everything):
        runs_on = sorted({p for t in everything for p in t.platforms})
        raise ConfigError(
            f"none of the {len(everything)} selected tasks runs on the configured pools' platforms {served}"
            f"{f' among tasks.platforms {cfg.platforms}' if cfg.platforms else ''}; the tasks run on {runs_on}: "
            f"choose backends={runs_on[0] if runs_on else 'web'} (conf/backends/) or another tasks.pool"
        )
    if n_left:
        where = ", ".join(f"{p}: {n}" for p, n in sorted(left_out.items()))
        why = "not in tasks.platforms" if cfg.platforms else "no pool serves them"
        notes.append(
            f"left out {n_left} of {len(everything)} tasks that run only on other platforms ({where}; {why})"
        )
    return load_tasks(replace(cfg, platforms=wanted)), notes


def _families(cfg: TasksConfig) -> list:
    """A "families:" pool: training and held-out instances of each family; with ``novel_families``, those
    families' training instances are split "rl" and only they are held out (the novel-apps experiment)."""
    names = family_names(cfg.pool[len(FAMILIES_PREFIX) :])
    if not cfg.novel_families:
        return family_tasks(
            names, cfg.family_train, cfg.family_heldout, cite_ids=cfg.family_cite_ids, ids=cfg.family_ids
        )
    novel = family_names(",".join(cfg.novel_families))
    if set(novel) & set(names):
        raise ConfigError(f"tasks.novel_families {novel} must not be in tasks.pool {names}")
    # the experiment holds out the novel split (apps/registry.py NOVEL_APPS): its RL-only families come from it
    if off := [n for n in novel if FAMILIES[n].app not in NOVEL_APPS]:
        raise ConfigError(f"tasks.novel_families {off} are not on a novel app ({', '.join(NOVEL_APPS)})")
    kw = {"cite_ids": cfg.family_cite_ids, "ids": cfg.family_ids}
    return family_tasks(names, cfg.family_train, 0, **kw) + family_tasks(
        novel, cfg.family_train, cfg.family_heldout, train_split="rl", **kw
    )
