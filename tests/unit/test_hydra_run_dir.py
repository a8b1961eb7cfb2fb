"""With ``output_dir`` set, Hydra's own files (.hydra/) go into the run directory, not outputs/DATE/TIME in the
working directory (conf/*.yaml hydra.run.dir and the maigym_run_dir resolver of runtime/schema.register)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _eval(cwd: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    # A pool that does not exist: the job stops at load (no Ray, no browser), after Hydra made its run dir.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HYDRA_FULL_ERROR": "1"}
    cmd = [
        sys.executable,
        "-m",
        "maigym_ray.cli.eval",
        f"tasks.pool={cwd / 'none.jsonl'}",
        "wandb.mode=disabled",
    ]
    return subprocess.run([*cmd, *overrides], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_hydra_files_go_to_output_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _eval(tmp_path, f"output_dir={run}")
    assert "none.jsonl does not exist" in proc.stderr, proc.stderr[-2000:]
    assert (run / ".hydra" / "config.yaml").is_file()
    assert f"output_dir: {run}" in (run / ".hydra" / "config.yaml").read_text()
    assert not (tmp_path / "outputs").exists()


def test_without_output_dir_hydra_keeps_its_dated_folder(tmp_path: Path) -> None:
    proc = _eval(tmp_path)
    assert "none.jsonl does not exist" in proc.stderr, proc.stderr[-2000:]
    assert len(list((tmp_path / "outputs").glob("*/*/.hydra/config.yaml"))) == 1
