"""``python -m maigym_ray.cli.train``: the main job. A held-out eval, SFT warm-up on golden demonstrations, a
held-out eval, GRPO rounds, a held-out eval, and a report (``report.json`` with ``heldout_success_before``,
``heldout_success_sft``, ``heldout_success_rl``, ``rounds``, ``seconds``, plus PNG plots) in the run directory.

The config is built here (Hydra → dataclasses); :mod:`maigym_ray.runtime.training` brings the roles up through
the session and hands them to the driver actor. ``driver.resume=true output_dir=RUN`` continues an interrupted run from its last checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.runtime.schema import TrainConfig, register
from maigym_ray.runtime.training import train

register()


@hydra.main(config_path="../../conf", config_name="train", version_base="1.3")
def main(dcfg: DictConfig) -> None:
    """Hydra entry point."""
    cfg: TrainConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
    run_dir = Path(cfg.output_dir or hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    report = train(cfg, run_dir)
    summary = {
        k: report.get(k) for k in ("heldout_success_before", "heldout_success_sft", "heldout_success_rl")
    }
    print(json.dumps({**summary, "rounds": report["rounds"], "seconds": round(report["seconds"], 1)}))
    print(f"report: {run_dir / 'report.json'}")


if __name__ == "__main__":
    main()
