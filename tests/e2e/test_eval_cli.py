"""The eval CLI end to end: Hydra config, local Ray, real Chromium, Parquet results, the success table."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "maigym_ray.cli.eval",
        "experiment=debug",
        "wandb.mode=offline",
        f"output_dir={tmp_path}",
        f"hydra.run.dir={tmp_path}/hydra",
        *overrides,
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_eval_golden_on_two_apps(tmp_path):
    proc = _run(tmp_path, "tasks.apps=[mail,food]", "concurrency=2", "env.pools.web.target_size=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = pq.read_table(tmp_path / "results.parquet").to_pylist()
    assert len(rows) == 10 and {r["app"] for r in rows} == {"mail", "food"}
    assert all(r["success"] and not r["infra_failed"] for r in rows)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["success_rate"] == 1.0 and report["by_platform"] == {"web": 1.0}
    assert "mail" in proc.stdout and "success" in proc.stdout  # the printed table
    assert list((tmp_path / "wandb").glob("offline-run-*")), "wandb offline run missing"


def test_eval_random_policy_scores_low_and_bad_config_fails_clearly(tmp_path):
    proc = _run(
        tmp_path,
        "policy.kind=random",
        "tasks.limit=3",
        "concurrency=2",
        "env.pools.web.target_size=2",
        "wandb.mode=disabled",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = pq.read_table(tmp_path / "results.parquet").to_pylist()
    assert len(rows) == 3 and sum(r["success"] for r in rows) <= 1
    bad = _run(tmp_path / "bad", "policy.kind=genius", "wandb.mode=disabled")
    assert bad.returncode != 0 and "registered: golden, random" in bad.stderr


def test_collect_keeps_trajectories(tmp_path):
    from maigym_ray.harness.trajectory_store import load_trajectories

    cmd = [
        sys.executable,
        "-m",
        "maigym_ray.cli.collect",
        "experiment=debug",
        "wandb.mode=disabled",
        "tasks.apps=[calendar]",
        "tasks.limit=2",
        "concurrency=2",
        "env.pools.web.target_size=2",
        "keep_screenshots=true",
        f"output_dir={tmp_path}",
        f"hydra.run.dir={tmp_path}/hydra",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trajs = list(load_trajectories(tmp_path / "trajectories"))
    assert len(trajs) == 2 and all(t.reward.success for t in trajs)
    assert all(u.screenshot.startswith(b"\x89PNG") for t in trajs for u in t.turns)
    from maigym_ray.tasks.pool import TaskPool

    pool = TaskPool.builtin()
    for t in trajs:  # the stored actions are the golden solution that was played
        golden = list(pool.get(t.task_id).golden)
        assert [u.action_text for u in t.turns][: len(golden)] == golden
        # each step keeps the a11y text it acted on and the reply (a golden policy reads no prompt)
        assert all(u.a11y.startswith('page "') and "\n[" in u.a11y for u in t.turns)
        assert all(u.response_text == u.action_text for u in t.turns)
        assert all(u.prompt_text == "" for u in t.turns)
    _view(tmp_path, trajs[0].turns[0].a11y)


def _view(run_dir: Path, a11y: str) -> None:
    """The quickstart's next command, ``python -m maigym_ray.cli.view RUN_DIR``, serves this run: its episodes,
    a step's texts and its screenshot (the browser test drives the pages themselves)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "maigym_ray.cli.view", str(run_dir), "--port", str(port)]
    viewer = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/api/runs/0"
    try:
        assert "viewer on http://127.0.0.1:" in viewer.stdout.readline()  # printed once it listens
        with urllib.request.urlopen(f"{base}/episodes?sort=order", timeout=30) as r:
            page = json.load(r)
        assert page["total"] == 2 and {e["app"] for e in page["episodes"]} == {"calendar"}
        first = next(e for e in page["episodes"] if e["row"] == 0 and e["part"] == "part-00000.parquet")
        q = urllib.parse.urlencode({"store": first["store"], "part": first["part"], "row": 0, "step": 0})
        with urllib.request.urlopen(f"{base}/episode?{q}", timeout=30) as r:
            step = json.load(r)["turns"][0]
        assert step["a11y"] == a11y and step["response_text"] == step["action_text"]
        with urllib.request.urlopen(f"{base}/screenshot?{q}&thumb=1", timeout=30) as r:
            assert r.read().startswith(b"\x89PNG")
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)


@pytest.mark.engine
def test_eval_with_the_real_engine_on_two_tasks(tmp_path):
    proc = _run(
        tmp_path,
        "policy.kind=engine",
        "tasks.apps=[contacts]",
        "tasks.limit=2",
        "concurrency=2",
        "env.pools.web.target_size=2",
        "policy.sampling.max_tokens=24",
        "wandb.mode=disabled",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = pq.read_table(tmp_path / "results.parquet").to_pylist()
    assert len(rows) == 2 and not any(r["infra_failed"] for r in rows)
    assert all(r["steps"] >= 1 for r in rows)  # a random-init model mostly writes unparsable actions
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["policy"] == "engine" and 0.0 < report["prefix_cache_hit_rate"] <= 1.0


def test_curriculum_goldens_and_demonstrations_solve_every_task_live(tmp_path):
    """The debug curriculum is validated on live instances: every golden solution, replayed as token-in /
    token-out demonstrations (the SFT samples), solves its task, and the stored turns carry the prompt and
    response ids that SFT trains on."""
    from maigym_ray.harness.trajectory_store import load_trajectories
    from maigym_ray.tasks.curriculum import curriculum_tasks

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "maigym_ray.cli.collect",
            "experiment=debug",
            "tasks.pool=curriculum",
            "policy.kind=demo",
            "wandb.mode=disabled",
            f"output_dir={tmp_path}",
            f"hydra.run.dir={tmp_path}/hydra",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    trajs = list(load_trajectories(tmp_path / "trajectories"))
    assert {t.task_id for t in trajs} == {t.id for t in curriculum_tasks()}
    assert all(t.reward.success and not t.infra_failed for t in trajs)
    for t in trajs:
        assert all(u.prompt_ids and u.response_ids and u.response_ids[-1] == 2 for u in t.turns)  # <|im_end|>


def test_eval_mixed_platforms_reports_each(tmp_path):
    # backends=mix: web, mobile-web and desktop pools in one run; each task goes to a pool of its platforms.
    proc = _run(tmp_path, "backends=mix", "tasks.apps=[contacts]", "concurrency=3", "wandb.mode=disabled")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = pq.read_table(tmp_path / "results.parquet").to_pylist()
    by_platform: dict[str, list[bool]] = {}
    for r in rows:
        by_platform.setdefault(r["platform"], []).append(r["success"])
    # the 5 contacts tasks on web and on mobile web, plus the desktop task that uses Contacts and a file
    assert {p: len(v) for p, v in by_platform.items()} == {"web": 5, "mobile_web": 5, "desktop": 1}
    assert not any(r["infra_failed"] for r in rows)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["by_platform"] == {"desktop": 1.0, "mobile_web": 1.0, "web": 1.0}
