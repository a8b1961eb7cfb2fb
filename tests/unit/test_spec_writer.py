"""Unit tests for the LLM spec writer (synth/spec_writer.py, runtime/spec_writing.py): a ScriptedEngine behind
the engine policy kind's router writes the drafts; each must be kept or rejected at the right gate, saying why.

Validation here replays each derived task in process on :class:`~maigym_ray.synth.screens.Screens` (the
verifier fails on the initial state and passes after the golden solution); the live path on Chromium is
tests/integration/test_spec_writer_live.py."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from maigym_ray.apps.registry import APP_CLASSES
from maigym_ray.apps.spec.loader import load_spec
from maigym_ray.config import PolicyConfig
from maigym_ray.errors import ConfigError, TaskError
from maigym_ray.generation import SamplingConfig
from maigym_ray.policy.config import EngineConfig
from maigym_ray.policy.engine import resolve_model
from maigym_ray.rollout import chat_format, load_tokenizer, text_client
from maigym_ray.runtime.schema import SpecWriterConfig, SynthConfig
from maigym_ray.runtime.spec_writing import write_specs
from maigym_ray.synth.spec_writer import DraftRecord, SpecWriter, build_prompt, extract_json, unique_name
from maigym_ray.synth.validation import Verdict
from maigym_ray.tasks.pool import TaskPool
from maigym_ray.tasks.verifiers import run_verifier
from maigym_ray.testing import ScriptedEngine
from maigym_ray.testing.loopback_http import loopback_http
from maigym_ray.types import TaskSpec
from tests.unit.test_spec_task_kinds import play

pytestmark = pytest.mark.unit

#: A small, sound spec: one entity, a list and a detail screen, a create and a toggle action.
GOOD: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "specs" / "plantlog.json").read_text()
)


def schema_violation() -> dict[str, Any]:
    bad = copy.deepcopy(GOOD)
    bad["actions"][1]["kind"] = "fly"
    return bad


def unreachable() -> dict[str, Any]:
    """Sound by the schema and the reference rules, but the tags have no screen: "flip" is on no screen."""
    bad = copy.deepcopy(GOOD)
    bad["entities"]["tags"] = {
        "label": "Tag",
        "id_prefix": "t",
        "title_field": "name",
        "fields": {"name": {"type": "string"}, "on": {"type": "bool"}},
        "seed": {"records": [{"name": "green"}]},
    }
    bad["actions"].append({"id": "flip", "kind": "toggle", "entity": "tags", "label": "Flip", "field": "on"})
    return bad


REPLIES = [
    "Here is the app:\n```json\n" + json.dumps(GOOD) + "\n```",
    '{"spec_version": 1, "name": "plantlog", entities: [',
    json.dumps(schema_violation()),
    json.dumps(unreachable()),
]


class Handle:
    """A ScriptedEngine where the router expects an actor handle (``generate.remote``), without Ray."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.generate = SimpleNamespace(remote=engine.generate)


def scripted(replies: list[str]) -> tuple[PolicyConfig, list[Any]]:
    tok = load_tokenizer(resolve_model("tiny-text"))
    ids = [tok.encode(r, add_special_tokens=False).ids for r in replies]
    policy = PolicyConfig(
        kind="engine", engine=EngineConfig(model="tiny-text"), sampling=SamplingConfig(max_tokens=4096)
    )
    return policy, [Handle(ScriptedEngine(ids))]


async def replay(tasks: list[TaskSpec], files: list[Path]) -> list[Verdict]:
    """Validation in process: the verifier fails on the initial state and passes after the golden solution."""
    out = []
    for t in tasks:
        fields = {
            "initial_state": t.initial_state,
            "apps": t.apps,
            "start_app": t.start_app,
            "golden": t.golden,
        }
        try:
            before, after, answer = play(fields)
        except TaskError as exc:
            out.append(Verdict(t.id, False, "golden_action_failed", str(exc)))
            continue
        if run_verifier(t.verifier, before, None).success:
            out.append(Verdict(t.id, False, "verifier_passes_initial_state"))
        elif not run_verifier(t.verifier, after, answer).success:
            out.append(Verdict(t.id, False, "golden_misses_goal"))
        else:
            out.append(Verdict(t.id, True))
    return out


def test_scripted_drafts_are_kept_or_rejected_at_the_right_gate(tmp_path: Path) -> None:
    policy, engines = scripted(REPLIES)
    cfg = SynthConfig(spec_writer=SpecWriterConfig(["a log of house plants and when they were watered"], 4))
    cfg.spec_writer.policy = policy
    report = asyncio.run(write_specs(cfg, tmp_path, engines=engines, validate=replay))

    recs = {
        r["draft_id"]: r for r in map(json.loads, (tmp_path / "spec_drafts.jsonl").read_text().splitlines())
    }
    kept = recs["d0-a0"]
    assert kept["stage"] == "kept" and kept["valid_tasks"] >= 1 and kept["valid_tasks"] <= kept["tasks"]
    spec = load_spec(kept["file"])  # the kept file is a loadable spec of the (possibly renamed) app
    assert spec["name"] == kept["app"] and kept["app"].startswith("plantlog")
    assert len(TaskPool.load(tmp_path / "kept" / f"{kept['app']}.tasks.parquet")) == kept["valid_tasks"]

    assert (recs["d0-a1"]["stage"], recs["d0-a1"]["reason"]) == ("json", "bad_json")
    assert (recs["d0-a2"]["reason"], recs["d0-a2"]["spec_path"]) == ("bad_spec", "$.actions[1].kind")
    assert "'fly' is not one of" in recs["d0-a2"]["detail"]
    assert (recs["d0-a3"]["stage"], recs["d0-a3"]["reason"], recs["d0-a3"]["detail"]) == (
        "reach",
        "unreachable_action",
        "flip",
    )
    for rid in ("d0-a1", "d0-a2", "d0-a3"):  # every rejection is kept with its reason, beside the reply
        assert (
            json.loads((tmp_path / "rejected" / f"{rid}.json").read_text())["reason"] == recs[rid]["reason"]
        )
        assert (tmp_path / "drafts" / f"{rid}.txt").read_text() == REPLIES[int(rid[-1])]
    assert not (tmp_path / "rejected" / "d0-a0.json").exists()

    assert report["passed"] == {"json": 3, "spec": 2, "reach": 1, "tasks": 1, "validation": 1}
    assert report["kept"] == 1 and report["kept_apps"] == [kept["app"]]
    assert report["rejected_by_reason"] == {"bad_json": 1, "bad_spec": 1, "unreachable_action": 1}
    assert report["model"] == "tiny-text" and report["policy_kind"] == "engine"
    assert json.loads((tmp_path / "spec_writer_report.json").read_text()) == report


def test_a_draft_with_no_valid_task_and_a_failing_model_are_rejected_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    replies = iter([RuntimeError("server down"), json.dumps({**GOOD, "name": "phonebook"})])

    async def ask(prompt: str, episode_id: str) -> str:
        assert "a phone book" in prompt and episode_id == "spec-writer-d0"
        r = next(replies)
        if isinstance(r, Exception):
            raise r
        return r

    async def nothing_passes(tasks: list[TaskSpec], files: list[Path]) -> list[Verdict]:
        return [Verdict(t.id, False, "golden_misses_goal") for t in tasks]

    recs, report = asyncio.run(
        SpecWriter(ask, tmp_path, set(APP_CLASSES)).run(["a phone book"], 2, nothing_passes)
    )
    assert (recs[0].reason, recs[0].detail) == ("llm_error", "RuntimeError: server down")
    assert recs[1].app != "phonebook" and recs[1].app.startswith("phonebook_")  # never replaces an app
    assert recs[1].reason == "no_valid_tasks" and recs[1].tasks > 0 and recs[1].valid_tasks == 0
    assert json.loads(recs[1].detail) == {"golden_misses_goal": recs[1].tasks}
    assert report["kept"] == 0 and report["passed"]["tasks"] == 1 and report["passed"]["validation"] == 0


def test_the_prompt_and_the_json_extraction() -> None:
    prompt = build_prompt("  a bike repair shop  ")
    assert prompt.endswith(
        "Write the spec for this app: a bike repair shop\nReply with the JSON object only."
    )
    example = prompt.split("yours must be different):\n", 1)[1].split("\n", 1)[0]
    assert json.loads(example)["name"] == "phonebook"  # a real spec, compact, in the prompt
    assert extract_json('Sure! {"a": [1, {"b": 2}]} and more {"c": 3}') == {"a": [1, {"b": 2}]}
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    for bad in ("no json here", '{"a": 1', "{__import__('os')}"):
        with pytest.raises(ValueError):
            extract_json(bad)
    assert unique_name("notes", {"notes", "notes_2"}) == "notes_3"
    assert unique_name("x" * 31, {"x" * 31}) == "x" * 28 + "_2"


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="attempts"):
        SpecWriterConfig(["an app"], attempts=0)
    with pytest.raises(ConfigError, match="descriptions"):
        SpecWriterConfig(["an app", "  "])
    with pytest.raises(ConfigError, match="no model to ask"):
        text_client(PolicyConfig(kind="golden"), None)


def test_replies_that_are_not_a_spec_object_are_bad_json(tmp_path: Path) -> None:
    writer = SpecWriter(lambda p, e: None, tmp_path, set())  # type: ignore[arg-type,return-value]
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"  # too deep for any parser's stack
    for i, reply in enumerate(['["a list", "not an object"]', deep]):
        rec = asyncio.run(writer.check(DraftRecord(f"d{i}-a0", "x", 0), reply))
        assert isinstance(rec, DraftRecord) and rec.reason == "bad_json", rec


async def test_the_openai_kind_writes_through_a_completions_server(tmp_path: Path) -> None:
    from aiohttp import web

    prompts: list[str] = []
    tok = load_tokenizer(resolve_model("tiny-text"))

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        prompts.append(tok.decode(body["prompt"], skip_special_tokens=False))
        return web.json_response({"choices": [{"text": json.dumps(GOOD)}]})

    async with loopback_http(web.post("/v1/completions", completions)) as port:
        url = f"http://127.0.0.1:{port}/v1"
        policy = PolicyConfig(
            kind="openai", engine=EngineConfig(model="tiny-text"), options={"base_url": url}
        )
        cfg = SynthConfig(spec_writer=SpecWriterConfig(["a house plant log"], 1, policy=policy))
        report = await write_specs(cfg, tmp_path, validate=replay)
    assert report["kept"] == 1 and report["policy_kind"] == "openai"
    # one user turn in the model's chat format, the description last, the assistant's turn opened
    prompt = prompts[0]
    assert "a house plant log" in prompt and prompt.index("phonebook") < prompt.index("house plant")
    assert prompt.endswith(chat_format(policy).assistant_open)
