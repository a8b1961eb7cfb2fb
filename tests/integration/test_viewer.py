"""The run viewer in a real browser (Playwright on Debian's Chromium) against run directories a fixture writes
in the real formats: Parquet trajectory parts (harness/trajectory_store.py), results.parquet (cli/eval.py),
metrics.jsonl and report.json (rl/driver.py), with PNG screenshots drawn by PIL.

MAIGYM_DOCS_SCREENSHOTS=1 also saves the main pages into docs/img/ (how the docs' screenshots are made).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiohttp import web
from PIL import Image, ImageDraw

from maigym_ray.envs.backends.chromium import CHROMIUM_FLAGS, find_chromium
from maigym_ray.harness.trajectory_store import SCHEMA, TURN, to_row, write_all
from maigym_ray.runtime.evaluation import RESULT_SCHEMA
from maigym_ray.types import Reward, Trajectory, Turn
from maigym_ray.viewer.episodes import EpisodeIndex, Filter
from maigym_ray.viewer.rundir import RunDir
from maigym_ray.viewer.server import make_app

pytestmark = pytest.mark.integration

EVIL = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def _png(label: str, color: str) -> bytes:
    img = Image.new("RGB", (360, 640), "white")
    d = ImageDraw.Draw(img)
    d.rectangle((0, 0, 360, 48), fill=color)
    d.text((12, 16), label, fill="white")
    for i in range(4):
        d.rectangle((24, 90 + i * 70, 336, 140 + i * 70), outline="#888")
        d.text((36, 108 + i * 70), f"item {i}", fill="black")
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


HEADER = "<|im_start|>system\nYou operate a mobile web device.\nTask: mail bob<|im_end|>\n"


def a11y(i: int) -> str:
    return f'[new] button "New mail"\n[to] textbox "To"\n[item{i}] link "Inbox item {i}"'


def obs_turn(i: int) -> str:
    return f"<|im_start|>user\nStep {i + 1}.\n{a11y(i)}<|im_end|>\n<|im_start|>assistant\n"


def _turn(i: int, text: str, parse_error: str = "", reply: str = "", page: str = "") -> Turn:
    """Step ``i`` of a model episode in one history window: step 0 keeps the whole prompt, later steps keep
    only their observation turn (what the harness records)."""
    return Turn(
        index=i,
        action_text=text,
        action=None,
        parse_error=parse_error,
        prompt_ids=tuple(range(40 + i)),
        response_ids=(1, 2, 3),
        logprobs=(-0.1, -0.2, -0.3),
        screenshot=_png(f"step {i}", "#345"),
        timings={"policy_s": 0.05, "env_s": 0.02, "cached_tokens": 30.0},
        a11y=a11y(i) + page,
        prompt_text=(HEADER if i == 0 else "") + obs_turn(i) + page,
        prompt_continued=i > 0,
        response_text=reply or f"Thought: step {i}.\nAction: {text}",
    )


def write_old_store(directory: Path, trajs: list[Trajectory]) -> None:
    """A store as written before a11y, prompt and response text were kept (those columns absent)."""
    text = {"a11y", "response_text", "prompt_text", "prompt_continued"}
    old_turn = pa.struct([f for f in TURN if f.name not in text])
    old = pa.schema([pa.field("turns", pa.list_(old_turn)) if f.name == "turns" else f for f in SCHEMA])
    rows = [to_row(t) for t in trajs]
    for r in rows:
        r["turns"] = [{k: v for k, v in u.items() if k not in text} for u in r["turns"]]
    directory.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=old), directory / "part-00000.parquet")


def _traj(eid: str, task: str, success: bool, turns: list[Turn], version: int = 0) -> Trajectory:
    reward = Reward(1.0 if success else 0.0, success, "mail sent to bob" if success else "no mail sent")
    return Trajectory(eid, task, "mobile_web", tuple(turns), reward, policy_version=version)


def _collect_run(root: Path) -> Path:
    """A collect run: one store, results.parquet with apps and splits, report.json, the Hydra config."""
    run = root / "collect-run"
    trajs = [
        _traj(
            "ep-ok",
            "mail-send",
            True,
            [
                _turn(0, "click(x=500,y=175)"),
                _turn(1, 'type(text="hello bob",x=500,y=315)'),
                _turn(2, "swipe(from_x=500,from_y=800,to_x=500,to_y=200)"),
                _turn(3, 'terminate(status="success")'),
            ],
        ),
        _traj(
            "ep-evil",
            "mail-send",
            False,
            [_turn(0, EVIL, "unknown action: expected NAME(...)", "Thought: " + EVIL, "\n" + EVIL)],
        ),
        _traj("ep-notes", "notes-add", False, [_turn(0, 'click(id="new")'), _turn(1, "navigate_back()")]),
    ]
    write_all(run / "trajectories", trajs)
    apps = {"mail-send": "mail", "notes-add": "notes"}
    rows = [
        {
            "episode_id": t.episode_id,
            "task_id": t.task_id,
            "app": apps[t.task_id],
            "apps": [apps[t.task_id]],
            "platform": t.platform,
            "split": "test" if t.task_id == "notes-add" else "train",
            "attempt": 0,
            "success": t.reward.success,
            "reward": t.reward.value,
            "steps": len(t.turns),
            "parse_errors": sum(1 for u in t.turns if u.parse_error),
            "infra_failed": False,
            "error": "",
            "reason": t.reward.reason,
            "seconds": 1.0,
        }
        for t in trajs
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=RESULT_SCHEMA), run / "results.parquet")
    (run / "report.json").write_text(json.dumps({"name": "collect", "episodes": 3, "success_rate": 1 / 3}))
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.yaml").write_text("name: collect\npolicy:\n  kind: model\n")
    return run


def _train_run(root: Path) -> Path:
    """A train run: held-out stores, three GRPO rounds, metrics.jsonl and report.json as the driver writes.
    Its held-out store predates the text columns."""
    run = root / "train-run"
    write_old_store(
        run / "trajectories" / "eval-before", [_traj("h0", "mail-send", False, [_turn(0, "wait()")])]
    )
    for r in range(3):
        trajs = [
            _traj(f"r{r}-{k}", "mail-send", k < r + 1, [_turn(0, "click(x=100,y=100)")] * (k + 1), r)
            for k in range(4)
        ]
        write_all(run / "trajectories" / "rl" / f"round-{r:04d}", trajs)
    lines = [{"phase": "eval-before", "heldout_success": 0.0, "infra_failed": 0}]
    lines += [{"phase": "sft", "demos": 4.0, "demo_failures": 0.0, "sync_s": 0.1, "sft_loss": 1.2}]
    lines += [
        {
            "round": r,
            "version": r + 2,
            "episodes": 4,
            "success": (r + 1) / 4,
            "reward": (r + 1) / 4,
            "zero_var_share": 0.5 - r * 0.1,
            "loss": 0.3 - r * 0.05,
            "kl": 0.01 * r,
            "rollout_s": 2.0,
            "update_s": 0.5,
            "sync_s": 0.1,
        }
        for r in range(3)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = {
        "heldout_success_before": 0.0,
        "heldout_success_sft": 0.25,
        "heldout_success_rl": 0.5,
        "rounds": 3,
    }
    (run / "report.json").write_text(json.dumps(report))
    return run


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    return [_collect_run(tmp_path), _train_run(tmp_path)]


def test_index_filters_sorts_and_reads_one_step(runs: list[Path]) -> None:
    idx = EpisodeIndex(RunDir(runs[0]))
    page = idx.query(Filter(outcome="failure"))
    assert {e["episode_id"] for e in page["episodes"]} == {"ep-evil", "ep-notes"}
    assert idx.query(Filter(app="notes"))["total"] == 1
    assert idx.query(Filter(split="train"))["total"] == 2
    assert [e["num_steps"] for e in idx.query(Filter(sort="steps", descending=True))["episodes"]] == [4, 2, 1]
    assert idx.query(Filter(), page=1, size=2)["episodes"][0]["episode_id"] == "ep-notes"
    ep = idx.episode("", "part-00000.parquet", 0)
    assert ep["turns"][2]["overlay"] == {
        "kind": "arrow",
        "label": "swipe",
        "from_x": 500,
        "from_y": 800,
        "to_x": 500,
        "to_y": 200,
    }
    assert "screenshot" not in ep["turns"][0]
    # The texts of one step: the window rebuilt from the step that began it, the reply, the a11y text.
    one = idx.episode("", "part-00000.parquet", 0, step=1)["turns"]
    reply0 = "Thought: step 0.\nAction: click(x=500,y=175)"
    assert one[1]["prompt_text"] == HEADER + obs_turn(0) + reply0 + obs_turn(1)
    assert (one[1]["a11y"], one[1]["prompt_window_from"]) == (a11y(1), 0)
    assert "a11y" not in one[0] and "prompt_text" not in one[2]  # other steps ship no texts
    assert idx.episode("", "part-00000.parquet", 0, step=99)["turns"][3]["a11y"] == a11y(3)
    assert idx.screenshot("", "part-00000.parquet", 0, 1).startswith(b"\x89PNG")
    with pytest.raises(KeyError):
        idx.locate("", "../../etc/passwd")
    # An eval run keeps no trajectories: its results.parquet still lists, filters and compares.
    eval_only = runs[0].parent / "eval-run"
    eval_only.mkdir()
    (eval_only / "results.parquet").write_bytes((runs[0] / "results.parquet").read_bytes())
    listed = EpisodeIndex(RunDir(eval_only)).query(Filter(outcome="success"))["episodes"]
    assert [(e["episode_id"], e["app"], e["row"], e["num_steps"]) for e in listed] == [
        ("ep-ok", "mail", -1, 4)
    ]
    train = EpisodeIndex(RunDir(runs[1]))
    assert train.query(Filter(round="2"))["total"] == 4
    assert train.query(Filter(split="heldout"))["total"] == 1
    assert RunDir(runs[1]).rounds()[0]["throughput"] == 2.0
    old = train.episode("eval-before", "part-00000.parquet", 0, step=0)["turns"][0]  # an older store
    assert old["action_text"] == "wait()" and not {"a11y", "prompt_text", "response_text"} & set(old)


@pytest.fixture
async def viewer(runs: list[Path]):
    runner = web.AppRunner(make_app(runs))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/"
    await runner.cleanup()


@pytest.fixture
async def page():
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=find_chromium(), args=list(CHROMIUM_FLAGS))
        pg = await browser.new_page(viewport={"width": 1100, "height": 480})
        yield pg
        await browser.close()


async def _open(page, url: str) -> None:
    await page.goto(url)
    await page.wait_for_function("h => document.body.dataset.ready === h", arg=url[url.index("#") :])


async def _shot(page, name: str, tmp: Path) -> None:
    out = DOCS_IMG if os.environ.get("MAIGYM_DOCS_SCREENSHOTS") == "1" else tmp
    out.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(out / name), full_page=True)


async def test_browse_filter_step_and_compare(viewer: str, page, runs: list[Path], tmp_path: Path) -> None:
    # Runs page of the train run: held-out before/SFT/RL and a curve per metric.
    await _open(page, viewer + "#/run/1")
    assert await page.locator("#heldout td").all_inner_texts() == ["0", "0.250", "0.500"]
    assert await page.locator("#curves [data-curve]").count() == 6
    assert await page.locator('[data-curve="success"] circle').count() == 3
    await _shot(page, "viewer-run.png", tmp_path)

    # A run still going (no report.json yet) is polled: a round appended to metrics.jsonl shows up.
    (runs[1] / "report.json").unlink()
    await _open(page, viewer + "#/run/1?live")
    assert await page.locator('[data-curve="success"] circle').count() == 3
    with (runs[1] / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"round": 3, "success": 1.0, "kl": 0.05, "loss": 0.1, "rollout_s": 1.0}) + "\n")
    await page.wait_for_function(
        "() => document.querySelectorAll('[data-curve=\"success\"] circle').length === 4", timeout=10_000
    )
    assert "running" in await page.inner_text("#run-state")

    # Episodes of the collect run, filtered by outcome through the select.
    await _open(page, viewer + "#/episodes/0")
    assert await page.locator("#episodes tr").count() == 4
    await page.select_option("select[name=outcome]", "failure")
    await page.wait_for_function("() => document.body.dataset.ready.includes('outcome=failure')")
    ids = await page.locator("#episodes td:first-child").all_inner_texts()
    assert sorted(ids) == ["ep-evil", "ep-notes"]
    await page.select_option("select[name=outcome]", "")
    await page.wait_for_function("() => !document.body.dataset.ready.includes('outcome')")
    await _shot(page, "viewer-episodes.png", tmp_path)

    # Click through to an episode and step through it: click marker, typed text, swipe arrow.
    await page.click("text=ep-ok")
    await page.wait_for_function("() => document.body.dataset.ready.startsWith('#/episode/')")
    await page.wait_for_function("() => document.getElementById('screenshot').naturalWidth === 360")
    assert await page.locator("#overlay").get_attribute("data-kind") == "point"
    marker = page.locator("#overlay .click-marker")
    assert (await marker.get_attribute("cx"), await marker.get_attribute("cy")) == ("50%", "17.5%")
    # The step's texts: the whole reply, the action cut from it, the a11y text and the prompt window.
    reply0 = "Thought: step 0.\nAction: click(x=500,y=175)"
    assert await page.text_content("#response") == reply0
    assert await page.text_content("#action") == "click(x=500,y=175)"
    assert await page.text_content("#a11y") == a11y(0)
    assert await page.text_content("#prompt") == HEADER + obs_turn(0)
    assert await page.inner_text("#outcome") == "success"
    assert await page.inner_text("#reason") == "mail sent to bob"
    assert "mail sent to bob" in await page.inner_text("#verdict")
    assert await page.inner_text("#parse-error-none") == "none"
    assert await page.locator("#thumbs img").count() == 4
    await _shot(page, "viewer-episode.png", tmp_path)
    await page.click("#next")
    await page.wait_for_function("() => document.body.dataset.ready.endsWith('step=1')")
    assert await page.inner_text("#typed") == "hello bob"
    # Inside a window the store keeps only the new turn; the page shows the whole window rebuilt.
    assert await page.text_content("#prompt") == HEADER + obs_turn(0) + reply0 + obs_turn(1)
    assert "a window that began at step 1" in await page.inner_text("#prompt-tokens")
    assert await page.text_content("#a11y") == a11y(1)
    await page.click("#next")
    await page.wait_for_function("() => document.body.dataset.ready.endsWith('step=2')")
    assert await page.locator("#overlay .swipe-arrow").count() == 1
    assert await page.get_attribute("#overlay .swipe-arrow", "y2") == "20%"

    # A <script> in the model's reply and in the page's a11y text (so in the prompt) is shown as text and
    # never runs.
    await _open(page, viewer + "#/episodes/0")
    await page.click("text=ep-evil")
    await page.wait_for_function("() => document.getElementById('response') !== null")
    assert await page.text_content("#response") == "Thought: " + EVIL
    assert await page.text_content("#action") == EVIL
    assert await page.text_content("#a11y") == a11y(0) + "\n" + EVIL
    assert (await page.text_content("#prompt")).endswith(obs_turn(0) + "\n" + EVIL)
    assert await page.inner_text("#parse-error") == "unknown action: expected NAME(...)"
    assert await page.evaluate("() => window.__pwned") is None
    assert await page.locator("#main script, #main img[src=x]").count() == 0

    # A store written before the texts were kept still opens, and says so.
    await _open(page, viewer + "#/episode/1?store=eval-before&part=part-00000.parquet&row=0")
    assert await page.text_content("#response") == "wait()"
    assert (await page.text_content("#a11y")).startswith("not recorded")
    assert (await page.text_content("#prompt")).startswith("not recorded")

    # Compare the two runs: success per task side by side.
    await _open(page, viewer + "#/compare?a=0&b=1")
    rows = await page.locator("#compare tr").all_inner_texts()
    mail = next(r for r in rows if r.startswith("mail-send"))
    assert "0.500 (n=2)" in mail and "0.462 (n=13)" in mail
    assert any(r.startswith("notes-add") and "0 (n=1)" in r for r in rows)
    await _shot(page, "viewer-compare.png", tmp_path)
    assert await page.evaluate("() => window.__pwned") is None


def test_cli_refuses_a_missing_run_dir(tmp_path: Path) -> None:
    from maigym_ray.cli.view import HOST, main
    from maigym_ray.errors import ConfigError

    assert HOST == "127.0.0.1"
    with pytest.raises(ConfigError, match="not a run directory"):
        main([str(tmp_path / "nope")])
