"""What one run directory holds, read on demand so that a run still being written shows its latest state.

The files come from three writers (runtime/evaluation.py for eval, cli/collect.py, rl/driver.py)::

    .hydra/config.yaml            the resolved config (Hydra writes it for every entry point)
    report.json                   eval: success_rate, by_split...; train: heldout_success_{before,sft,rl}, history
    metrics.jsonl                 train: one JSON line per GRPO round ({"round": ...}) or phase ({"phase": ...})
    results.parquet               eval/collect: one row per episode with app and split
    trajectories/part-*.parquet   collect: one store
    trajectories/<name>/...       train: stores "sft", "eval-before", "eval-sft", "eval-rl", "rl/round-NNNN"
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

#: The metrics the Runs page draws as curves, in order: (key in metrics.jsonl, title).
CURVES: tuple[tuple[str, str], ...] = (
    ("success", "rollout success"),
    ("kl", "KL to reference"),
    ("loss", "policy loss"),
    ("zero_var_share", "zero-variance share"),
    ("throughput", "episodes / s (rollout)"),
    ("reward", "mean reward"),
)


@dataclass(frozen=True)
class Store:
    """One trajectory store of a run: a directory of Parquet parts and what its name tells about its episodes."""

    #: the store's path relative to ``trajectories/`` ("" for collect's single store).
    name: str
    path: Path
    #: the GRPO round for "rl/round-NNNN" stores, else None.
    round: int | None
    #: "train" or "heldout" where the store's name tells it ("" where results.parquet must say).
    split: str


def _store(name: str, path: Path) -> Store:
    if name.startswith("rl/round-"):
        return Store(name, path, int(name.rsplit("-", 1)[1]), "train")
    if name.startswith("eval-"):
        return Store(name, path, None, "heldout")
    if name == "sft":
        return Store(name, path, None, "train")
    return Store(name, path, None, "")


class RunDir:
    """A run directory; every accessor rereads its file (they are small), so a live run updates."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self.name = self.path.name

    def report(self) -> dict[str, Any]:
        """``report.json``, or {} while the run has not written it."""
        return _json(self.path / "report.json") or {}

    def config_text(self) -> str:
        """The resolved config as YAML text ("" when there is none)."""
        for cand in (self.path / ".hydra" / "config.yaml", self.path / "config.yaml"):
            if cand.is_file():
                return cand.read_text(errors="replace")
        return ""

    def metrics(self) -> list[dict[str, Any]]:
        """Every line of ``metrics.jsonl`` (a torn last line of a run being written is skipped)."""
        path = self.path / "metrics.jsonl"
        if not path.is_file():
            return []
        out = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def rounds(self) -> list[dict[str, Any]]:
        """The GRPO rounds of ``metrics.jsonl`` with ``throughput`` (episodes per rollout second) added."""
        rows = []
        for m in self.metrics():
            if "round" in m:
                secs = m.get("rollout_s") or 0.0
                rows.append({**m, "throughput": m.get("episodes", 0) / secs if secs else 0.0})
        return rows

    def phases(self) -> list[dict[str, Any]]:
        """The phase lines of ``metrics.jsonl`` (SFT, held-out evals), in order."""
        return [m for m in self.metrics() if "phase" in m]

    def heldout(self) -> dict[str, float | None]:
        """Held-out success before training, after SFT and after RL (from the report, else from the phases)."""
        rep = self.report()
        out: dict[str, float | None] = {k: rep.get(f"heldout_success_{k}") for k in ("before", "sft", "rl")}
        for p in self.phases():
            label = str(p["phase"]).removeprefix("eval-")
            if label in out and out[label] is None and "heldout_success" in p:
                out[label] = p["heldout_success"]
        return out

    def stores(self) -> list[Store]:
        """The trajectory stores, in name order (rounds in round order)."""
        root = self.path / "trajectories"
        if not root.is_dir():
            return []
        dirs = sorted({p.parent for p in root.rglob("part-*.parquet")})
        names = [d.relative_to(root).as_posix() for d in dirs]
        return [_store("" if n == "." else n, d) for n, d in zip(names, dirs, strict=True)]

    def results(self) -> dict[str, dict[str, Any]]:
        """``results.parquet`` (eval/collect) by episode id: app, split and attempt (only those columns)."""
        path = self.path / "results.parquet"
        if not path.is_file():
            return {}
        cols = ["episode_id", "task_id", "app", "split", "platform", "success", "reward", "reason", "steps"]
        cols += ["parse_errors", "infra_failed", "error"]
        table = pq.read_table(path, columns=cols)
        return {r["episode_id"]: r for r in table.to_pylist()}

    def summary(self) -> dict[str, Any]:
        """What the Runs page shows of this run."""
        rep = self.report()
        return {
            "name": self.name,
            "path": str(self.path),
            "kind": "train" if (self.path / "metrics.jsonl").exists() else "eval",
            "report": rep,
            "config": self.config_text(),
            "phases": self.phases(),
            "rounds": self.rounds(),
            "curves": [{"key": k, "title": t} for k, t in CURVES],
            "heldout": self.heldout(),
            "stores": [s.name or "trajectories" for s in self.stores()],
            "done": bool(rep),
        }


def _json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:  # being rewritten right now
        return None
