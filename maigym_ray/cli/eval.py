"""``python -m maigym_ray.cli.eval``: run a task pool through the harness on leased environments and score it.

Writes ``results.parquet`` (one row per episode), ``report.json`` and a success table by app and platform
to the run directory (see :mod:`maigym_ray.runtime.evaluation`, which this Hydra entry point runs).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.rates import fmt_rate
from maigym_ray.runtime.evaluation import evaluate
from maigym_ray.runtime.schema import EvalConfig, register

register()


@hydra.main(config_path="../../conf", config_name="eval", version_base="1.3")
def main(dcfg: DictConfig) -> None:
    """Hydra entry point."""
    cfg: EvalConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
    out_dir = Path(cfg.output_dir or hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    report = asyncio.run(evaluate(cfg, out_dir))
    print(
        f"success_rate={fmt_rate(report['success_rate'], '.3f')} episodes={report['episodes']} "
        f"scored={report['scored']} task_errors={report['task_errors']} infra_failed={report['infra_failed']} "
        f"results={out_dir / 'results.parquet'}"
    )


if __name__ == "__main__":
    main()
