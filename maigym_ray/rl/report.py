"""The training run's report: ``report.json`` and PNG plots (success per round, reward, loss, KL, update time,
sync time, and held-out success before training, after SFT and after RL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from maigym_ray.durable import atomic_write_text
from maigym_ray.rates import fmt_rate

_PANELS = (
    ("success", "rollout success"),
    ("reward", "mean reward"),
    ("loss", "policy loss"),
    ("kl", "KL to reference"),
    ("update_s", "update time (s)"),
    ("sync_s", "weight sync time (s)"),
)


def _num(v: float | None) -> float:
    return float("nan") if v is None else v


def write_report(run_dir: str | Path, report: dict[str, Any]) -> dict[str, Any]:
    """Writes ``report.json`` and ``training.png`` / ``heldout.png`` into ``run_dir``; returns the report with
    the plot paths added."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    history = report.get("history", [])
    rounds = [h["round"] for h in history]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, (key, title) in zip(axes.flat, _PANELS, strict=True):
        ax.plot(rounds, [_num(h.get(key, 0.0)) for h in history], marker="o", ms=3)  # no data: a gap
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(run_dir / "training.png", dpi=90)
    plt.close(fig)

    labels = ["before", "sft", "rl"]
    raw = [report.get(f"heldout_success_{k}") for k in labels]
    values = [v or 0.0 for v in raw]
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    ax.bar(["before training", "after SFT", "after RL"], values, color=["#999", "#69c", "#3a6"])
    for i, v in enumerate(values):
        ax.text(i, v + 0.01, fmt_rate(raw[i]), ha="center")
    ax.set_ylim(0, 1.05)
    ax.set_title("held-out success")
    fig.tight_layout()
    fig.savefig(run_dir / "heldout.png", dpi=90)
    plt.close(fig)

    out = {**report, "plots": ["training.png", "heldout.png"]}
    atomic_write_text(run_dir / "report.json", json.dumps(out, indent=2))  # whole or absent, after a crash
    return out
