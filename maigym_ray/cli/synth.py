"""``python -m maigym_ray.cli.synth``: synthesise a validated task pool from seeded worlds.

worlds -> templates -> planned golden solutions (in-process pre-check) -> [LLM paraphrases] -> live validation
on EnvManager instances in parallel -> ``pool.parquet`` with the ``train``, ``test`` and ``ood_app`` splits.
The pipeline lives in :mod:`maigym_ray.runtime.synthesis`; this module is its Hydra entry point. With
``spec_writer.descriptions`` set it drafts app specs with a model instead (:mod:`maigym_ray.runtime.spec_writing`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

import maigym_ray  # noqa: F401  (loopback Ray settings before ray is imported)
from maigym_ray.runtime.schema import SynthConfig, register
from maigym_ray.runtime.spec_writing import print_spec_report, write_specs
from maigym_ray.runtime.synthesis import print_report, synthesize

register()


@hydra.main(config_path="../../conf", config_name="synth", version_base="1.3")
def main(dcfg: DictConfig) -> None:
    """Hydra entry point."""
    cfg: SynthConfig = OmegaConf.to_object(dcfg)  # type: ignore[assignment]
    out_dir = Path(cfg.output_dir or hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    if cfg.spec_writer.descriptions:
        print_spec_report(asyncio.run(write_specs(cfg, out_dir)), out_dir)
        return
    report = asyncio.run(synthesize(cfg, out_dir))
    print_report(report, out_dir)


if __name__ == "__main__":
    main()
