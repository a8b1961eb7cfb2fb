"""Unit tests for validation logic (with an in-process LiveEnv over the real apps), the diagnosis loop's
grouping and the LLM paraphraser (against a local server speaking the OpenAI chat-completions protocol)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from maigym_ray.actions import parse_action
from maigym_ray.errors import EnvTimeoutError
from maigym_ray.synth.diagnosis import failure_kind, group_failures, next_version_name, weakest
from maigym_ray.synth.generate import generate
from maigym_ray.synth.llm import EXAMPLE_TASK, LLMParaphraser, facts, keeps_facts
from maigym_ray.synth.screens import Screens
from maigym_ray.synth.validation import Verdict, state_hash, validate, validate_all
from maigym_ray.tasks.verifiers import run_verifier
from maigym_ray.testing.loopback_http import loopback_http
from maigym_ray.types import Observation, Reward, StepResult, TaskSpec

pytestmark = pytest.mark.unit


@contextlib.asynccontextmanager
async def chat_server(handler: Any) -> AsyncIterator[int]:
    """A local server speaking the OpenAI chat-completions protocol with ``handler``; yields its port."""
    async with loopback_http(web.post("/v1/chat/completions", handler)) as port:
        yield port


class ScreensEnv:
    """A LiveEnv over in-process screens (the real apps, no browser); ``leaky`` forgets to restore state."""

    def __init__(self, leaky: bool = False, fail_first: int = 0) -> None:
        self.leaky, self.fail_first, self.calls = leaky, fail_first, 0
        self.screens: Screens | None = None
        self.answer: str | None = None
        self.task: TaskSpec | None = None

    async def reset(self, task: TaskSpec) -> Any:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise EnvTimeoutError("reset timed out")
        if not (self.leaky and self.screens is not None):
            self.screens = Screens(task.initial_state, task.apps)
        self.screens.open_app(task.start_app)
        self.task, self.answer = task, None

    async def step(self, text: str) -> StepResult:
        a = parse_action(text)
        err = ""
        assert self.screens is not None
        try:
            if a.name == "click":
                self.screens.click(a.args["id"])
            elif a.name == "type":
                self.screens.type(a.args["id"], a.args["text"])
            elif a.name == "open_app":
                self.screens.open_app(a.args["name"])
            elif a.name == "answer":
                self.answer = a.args["text"]
        except Exception as exc:  # the screen refuses the action: an observation, as on a live env
            err = str(exc)
        obs = Observation(
            platform="web", screenshot=None, width=1024, height=768, a11y="", last_action_error=err
        )
        return StepResult(obs, False)

    async def evaluate(self) -> Reward:
        assert self.screens is not None and self.task is not None
        states = self.screens.state()
        return run_verifier(self.task.verifier, {a: states[a] for a in self.task.apps}, self.answer)

    async def state(self) -> dict[str, Any]:
        assert self.screens is not None
        return self.screens.state()


@pytest.fixture(scope="module")
def tasks() -> list[TaskSpec]:
    out, _ = generate([2], ["notes_pin", "x_mail_to_bank", "train_first"])
    return out


def test_sound_tasks_validate_and_a_leaky_reset_is_caught(tasks: list[TaskSpec]) -> None:
    for t in tasks:
        assert asyncio.run(validate(ScreensEnv(), t)).ok
    state_task = next(t for t in tasks if "kind:state" in t.tags)
    v = asyncio.run(validate(ScreensEnv(leaky=True), state_task))
    assert not v.ok and v.reason == "reset_not_equal"
    assert state_hash({"a": 1, "b": [1]}) == state_hash({"b": [1], "a": 1})


def test_infra_failures_are_retried_on_a_fresh_lease_then_reported(tasks: list[TaskSpec]) -> None:
    leased: list[ScreensEnv] = []
    released: list[bool] = []

    async def lease() -> ScreensEnv:
        env = ScreensEnv(fail_first=1 if not leased else 0)  # the first env's first reset times out
        leased.append(env)
        return env

    async def release(env: Any, broken: bool) -> None:
        released.append(broken)

    out = asyncio.run(validate_all(tasks, lease, release, concurrency=1, retries=1))
    assert [v.ok for v in out] == [True] * len(tasks)
    assert released.count(True) == 1 and len(leased) == 2  # the broken env was swapped, the task redone

    async def always_broken() -> ScreensEnv:
        return ScreensEnv(fail_first=99)

    out = asyncio.run(validate_all(tasks[:1], always_broken, release, concurrency=1, retries=1))
    assert out == [Verdict(tasks[0].id, False, "infra_failure", "EnvTimeoutError: reset timed out")]


def test_failure_kinds_and_weakest_groups(tasks: list[TaskSpec]) -> None:
    by_id = {t.id: t for t in tasks}
    info = next(t for t in tasks if "kind:info" in t.tags)
    state = next(t for t in tasks if "kind:state" in t.tags)
    row = {"task_id": info.id, "success": False, "steps": 3, "parse_errors": 0, "infra_failed": False}
    assert failure_kind(row, info) == "wrong_answer"
    assert failure_kind({**row, "parse_errors": 2, "steps": 4}, info) == "parse_error"
    assert failure_kind({**row, "steps": state.max_steps}, state) == "step_limit"
    assert failure_kind(row, state) == "wrong_screen"
    rows = [
        {**row, "task_id": info.id, "success": True},
        {**row, "task_id": info.id, "success": False},
        {**row, "task_id": state.id, "success": False},
        {**row, "task_id": state.id, "success": False},
        {**row, "task_id": state.id, "success": False, "infra_failed": True},  # not the agent's failure
        {**row, "task_id": "not-in-pool", "success": False},
    ]
    groups = group_failures(rows, by_id)
    assert {(g.template, g.episodes, g.successes) for g in groups} == {
        (info.tags[0].split(":")[1], 2, 1),
        (state.tags[0].split(":")[1], 2, 0),
    }
    assert [g.template for g in weakest(groups, 1)] == [state.tags[0].split(":")[1]]
    assert next_version_name("pool.parquet") == "pool_v2.parquet"
    assert next_version_name("pool_v2.parquet") == "pool_v3.parquet"


def test_paraphrases_must_keep_every_fact() -> None:
    text = "Transfer 12.50 EUR to Julia Novak with the reference \u201cConcert\u201d."
    assert facts(text) == ["12.50", "EUR", "Julia Novak", "Concert"]
    assert keeps_facts(text, "Send Julia Novak 12.50 EUR with \u201cConcert\u201d as the reference.")
    assert not keeps_facts(text, "Send Julia 12.50 EUR, reference Concert.")  # dropped a name
    assert not keeps_facts(text, text)  # not a paraphrase


async def test_paraphraser_speaks_openai_chat_and_filters() -> None:
    seen: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("Authorization", "")})
        if "broken" in body["messages"][0]["content"]:
            return web.Response(status=500, text="boom")
        orig = body["messages"][0]["content"].split("Instruction: ", 1)[1]
        good = orig.replace("Pin the note", "Please pin the note")
        return web.json_response(
            {"choices": [{"message": {"role": "assistant", "content": f"1. {good}\n2. Pin it."}}]}
        )

    async with chat_server(chat) as port:
        tasks, _ = generate([2], ["notes_pin"])
        broken = TaskSpec(**{**tasks[0].__dict__, "id": "b", "instruction": "broken task"})
        para = LLMParaphraser(f"http://127.0.0.1:{port}/v1", "m", api_key="k", n=2)
        out, rejected = await para.paraphrase_all([tasks[0], broken])
    assert [t.instruction for t in out] == [
        tasks[0].instruction.replace("Pin the note", "Please pin the note")
    ]
    assert out[0].id == f"{tasks[0].id}-para0" and out[0].verifier == tasks[0].verifier
    assert out[0].golden == tasks[0].golden and "llm_paraphrase" in out[0].tags
    assert {r.reason for r in rejected} == {"paraphrase_drops_facts", "llm_error"}
    assert seen[0]["auth"] == "Bearer k" and seen[0]["body"]["model"] == "m"


async def test_llm_written_tasks_are_parsed_as_checks_and_prechecked() -> None:
    import json

    from maigym_ray.synth.generate import draft_to_task
    from maigym_ray.synth.llm import LLMTaskWriter
    from maigym_ray.synth.world import make_world

    lines = [
        json.dumps(EXAMPLE_TASK),
        json.dumps({**EXAMPLE_TASK, "plan": [{"op": "exec", "code": "import os"}]}),  # no such op: rejected
        json.dumps(
            {
                **EXAMPLE_TASK,
                "checks": [{"op": "absent", "app": "notes", "path": "notes", "match": {"title": "?"}}],
            }
        ),  # passes at start
        "not json",
        # model-written code is refused, never run: an unknown key, an unknown op, an unused app, a $-operator
        json.dumps({**EXAMPLE_TASK, "verifier_code": "def verify(states, answer):\n    return True"}),
        json.dumps({**EXAMPLE_TASK, "checks": [{"op": "python", "code": "import os"}]}),
        json.dumps({**EXAMPLE_TASK, "checks": [{**EXAMPLE_TASK["checks"][0], "app": "mail"}]}),
        json.dumps(
            {**EXAMPLE_TASK, "checks": [{**EXAMPLE_TASK["checks"][0], "match": {"t": {"$where": "1"}}}]}
        ),
        json.dumps({**EXAMPLE_TASK, "checks": [{**EXAMPLE_TASK["checks"][0], "eval": "1"}]}),
    ]

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        assert "You write tasks" in body["messages"][0]["content"]
        return web.json_response({"choices": [{"message": {"content": "\n".join(lines)}}]})

    async with chat_server(chat) as port:
        writer = LLMTaskWriter(LLMParaphraser(f"http://127.0.0.1:{port}/v1", "m"), ["notes", "mail"], n=4)
        world = make_world(2)
        drafts, bad = await writer.drafts(world)
    assert len(drafts) == 2 and {r.reason for r in bad} == {"llm_bad_proposal"} and len(bad) == 7
    details = [r.detail for r in bad]
    assert "unknown op 'exec'" in details[0]
    assert "exactly the keys" in details[2] and "verifier_code" in details[2]
    assert "unknown op 'python'" in details[3]
    assert "reads app 'mail', which the task does not use" in details[4]
    assert "only operator" in details[5] and "unknown keys ['eval']" in details[6]
    ok = await asyncio.to_thread(draft_to_task, drafts[0], world, 0, 5)
    assert isinstance(ok, TaskSpec) and ok.verifier["name"] == "checks" and "llm_written" in ok.tags
    assert ok.golden == ('click(id="note-n3")', 'click(id="pin")')
    lax = await asyncio.to_thread(draft_to_task, drafts[1], world, 1, 5)
    assert not isinstance(lax, TaskSpec) and lax.reason == "verifier_passes_initial_state"
