"""``python -m maigym_ray.cli.collect``: run a task pool through the harness and keep every trajectory.

The same rollout path and harness as eval; the only difference is that each trajectory (prompt and response
ids, logprobs, actions, parse errors, timings, optionally screenshots) is appended to
``trajectories/part-*.parquet`` in the run directory (schema in maigym_ray/harness/trajectory_store.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.harness.trajectory_store import TrajectoryWriter
from maigym_ray.rates import fmt_rate
from maigym_ray.runtime.evaluation import evaluate
from maigym_ray.runtime.schema import CollectConfig, register

register()


@hydra.main(config_path="../../conf", config_name="collect", version_base="1.3")
def main(dcfg: DictConfig) -> None:
    """Hydra entry point."""
    cfg: CollectConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
    out_dir = Path(cfg.output_dir or hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    with TrajectoryWriter(out_dir / "trajectories", flush_every=cfg.flush_every) as writer:
        report = asyncio.run(
            evaluate(cfg, out_dir, on_trajectory=writer.write, keep_screenshots=cfg.keep_screenshots)
        )
    print(
        f"collected {writer.written} trajectories into {out_dir / 'trajectories'} "
        f"(success_rate={fmt_rate(report['success_rate'], '.3f')})"
    )


if __name__ == "__main__":
    main()
