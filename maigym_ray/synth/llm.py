"""Optional LLM-assisted synthesis through any OpenAI-compatible chat endpoint: instruction paraphrases and
whole new tasks.

Paraphrases add wording variety at no cost to correctness: a paraphrased task keeps its seeds, verifier and
golden solution, and only its instruction changes. Two guards keep it honest:

- :func:`keeps_facts`: every fact of the original instruction (quoted text, numbers, dates, times, emails,
  names) must appear verbatim in the paraphrase, or it is rejected as ``paraphrase_drops_facts``;
- the caller sends every paraphrased task through the same live validation as any other task, so nothing
  an LLM wrote enters a pool unchecked.

New tasks (:class:`LLMTaskWriter`): the model proposes, over one world's facts, an instruction, a verifier in
the declarative ``checks`` language of :mod:`maigym_ray.tasks.verifiers` and a plan in the planner's JSON step
language. Both are data, never code: model output is parsed, never run. The checks are validated strictly
(an unknown op or key, a wrong type, an app the task does not use: the proposal is rejected, saying why);
the planner turns the plan into a golden solution over the screens; then the pre-check and live validation
decide, as for any template.

A failed request is ``llm_error`` for that task; a malformed proposal is ``llm_bad_proposal``; the run goes on.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from typing import Any

import aiohttp

from maigym_ray.errors import TaskError
from maigym_ray.synth.generate import Rejection
from maigym_ray.tasks.verifiers import build_verifier
from maigym_ray.types import TaskSpec

PROMPT = (
    "Rewrite the instruction below {n} different ways for a phone or computer assistant. Keep every name, "
    "number, date, time, email address and quoted text exactly as written. Reply with one rewrite per line, "
    "nothing else.\n\nInstruction: {text}"
)
_FACT = re.compile(
    r"\u201c[^\u201d]+\u201d|\"[^\"]+\"|[\w.+-]+@[\w.-]+\w|\d[\d.:,\-]*\d|\d|[A-Z][\w'-]*(?: [A-Z][\w'-]*)*"
)


def facts(text: str) -> list[str]:
    """The tokens a paraphrase must keep: quoted text, emails, numbers, dates, times and capitalised names
    (a capitalised word that only starts a sentence is wording, not a fact)."""
    out = []
    for m in _FACT.finditer(text):
        tok = m.group(0)
        starts_sentence = m.start() == 0 or text[: m.start()].rstrip().endswith((".", "?", "!", ":"))
        if starts_sentence and tok[0].isupper() and " " not in tok:
            continue
        if starts_sentence and tok[0].isupper():
            tok = tok.split(" ", 1)[1]  # "Email Anna Berg" -> "Anna Berg"
        out.append(tok.strip('\u201c\u201d"').removesuffix("'s"))
    return out


def keeps_facts(original: str, paraphrase: str) -> bool:
    """Whether ``paraphrase`` keeps every fact of ``original`` and is not the original itself."""
    para = paraphrase.strip()
    if not para or para == original.strip():
        return False
    return all(f in para for f in facts(original))


class LLMParaphraser:
    """Asks an OpenAI-compatible ``/chat/completions`` endpoint for ``n`` paraphrases per task."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        n: int = 1,
        timeout_s: float = 60.0,
        concurrency: int = 4,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.n = n
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.sem = asyncio.Semaphore(concurrency)

    async def _ask(self, session: aiohttp.ClientSession, text: str) -> list[str]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": PROMPT.format(n=self.n, text=text)}],
            "temperature": 0.7,
            "max_tokens": 80 * self.n,
        }
        async with self.sem, session.post(self.url, json=body, headers=self.headers) as resp:
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
            reply = await resp.json()
        content = reply["choices"][0]["message"]["content"] or ""
        lines = [re.sub(r"^\s*(?:\d+[.)]|[-*])\s*", "", ln).strip() for ln in content.splitlines()]
        return [ln for ln in lines if ln][: self.n]

    async def paraphrase_all(self, tasks: list[TaskSpec]) -> tuple[list[TaskSpec], list[Rejection]]:
        """Paraphrased copies (ids ``<id>-para<k>``, tag ``llm_paraphrase``) and the rejected ones."""
        out: list[TaskSpec] = []
        rejected: list[Rejection] = []
        async with aiohttp.ClientSession(timeout=self.timeout) as session:

            async def one(t: TaskSpec) -> None:
                template = t.tags[0].split(":", 1)[-1] if t.tags else ""
                try:
                    paras = await self._ask(session, t.instruction)
                except (
                    aiohttp.ClientError,
                    TimeoutError,
                    RuntimeError,
                    KeyError,
                    IndexError,
                    ValueError,
                ) as exc:
                    rejected.append(
                        Rejection(f"{t.id}-para", template, "llm_error", f"{type(exc).__name__}: {exc}")
                    )
                    return
                for k, p in enumerate(paras):
                    tid = f"{t.id}-para{k}"
                    if keeps_facts(t.instruction, p):
                        out.append(replace(t, id=tid, instruction=p, tags=(*t.tags, "llm_paraphrase")))
                    else:
                        rejected.append(Rejection(tid, template, "paraphrase_drops_facts", p[:200]))

            await asyncio.gather(*(one(t) for t in tasks))
        out.sort(key=lambda t: t.id)
        return out, rejected


# -- LLM-written tasks ---------------------------------------------------------------------------------------------
TASK_PROMPT = """You write tasks for a GUI agent that uses these apps: {apps}.
Here are the facts of the user's world (JSON): {facts}
Write {n} new tasks, one JSON object per line, nothing else. Each object has:
  "instruction": what the user asks, naming records the way the apps show them;
  "apps": the apps the task needs, the first one is where it starts;
  "kind": "info" (answered) or "state" (changes something);
  "checks": the success test, a list of checks over the final app states (same shape as the JSON above) that
      must all hold, each exactly one of
      {{"op": "exists", "app": A, "path": P, "match": M}} (some record at A's state path P matches M),
      {{"op": "absent", "app": A, "path": P, "match": M}} (no record matches),
      {{"op": "answer", "any_of": [S], "numeric": B}} (the agent's answer is one of S);
      P is a dot path into the app's state, M maps field names to values ({{"$contains": S}} for a substring);
  "plan": the steps to solve it, each one of
      {{"op": "open", "app": A}}, {{"op": "click", "id": ID}}, {{"op": "click_text", "prefix": P, "text": T}},
      {{"op": "type", "id": ID, "text": T}}, {{"op": "read", "regex": R, "names": [N]}},
      {{"op": "answer", "text": T}} (T may use {{N}} for what was read).
Example: {example}"""

#: The one task the prompt shows (pinning a note every world has); tests use it as a well-formed proposal.
EXAMPLE_TASK: dict[str, Any] = {
    "instruction": "Pin the note \u201cBudget\u201d.",
    "apps": ["notes"],
    "kind": "state",
    "checks": [
        {"op": "exists", "app": "notes", "path": "notes", "match": {"title": "Budget", "pinned": True}}
    ],
    "plan": [
        {"op": "open", "app": "notes"},
        {"op": "click_text", "prefix": "note-", "text": "Budget"},
        {"op": "click", "id": "pin"},
    ],
}


#: The keys of one proposed task: exactly these (an unknown key, e.g. ``verifier_code``, rejects the proposal).
PROPOSAL_KEYS = frozenset({"instruction", "apps", "kind", "checks", "plan"})


def checks_from_json(checks: Any, apps: tuple[str, ...]) -> dict[str, Any]:
    """A ``checks`` verifier spec from an LLM's JSON, validated strictly (see
    :func:`maigym_ray.tasks.verifiers.validate_check`); every check must read one of the task's ``apps``.
    Raises TaskError or ValueError saying what is wrong."""
    if not isinstance(checks, list) or not checks:
        raise ValueError("checks must be a non-empty list")
    spec = {"name": "checks", "params": {"checks": checks}}
    build_verifier(spec)  # strict: unknown ops, keys and types raise TaskError
    for i, c in enumerate(checks):
        if c["op"] != "answer" and c["app"] not in apps:
            raise ValueError(f"check {i} reads app {c['app']!r}, which the task does not use ({list(apps)})")
    return spec


def plan_from_json(steps: Any) -> tuple[Any, ...]:
    """Planner steps from an LLM's JSON plan: data only (no code), each op checked. Raises ValueError."""
    from maigym_ray.synth.planner import Answer, Click, ClickText, Open, Read, Terminate, Type

    if not isinstance(steps, list) or not steps:
        raise ValueError("plan must be a non-empty list")
    out: list[Any] = []
    for i, st in enumerate(steps):
        if not isinstance(st, dict) or not isinstance(st.get("op"), str):
            raise ValueError(f"plan step {i} is not an object with an op")
        op = st["op"]
        try:
            if op == "open":
                out.append(Open(str(st["app"])))
            elif op == "click":
                out.append(Click(str(st["id"])))
            elif op == "click_text":
                out.append(ClickText(str(st["prefix"]), str(st["text"])))
            elif op == "type":
                out.append(Type(str(st["id"]), str(st["text"])))
            elif op == "read":
                re.compile(str(st["regex"]))
                out.append(Read(str(st["regex"]), tuple(str(n) for n in st["names"])))
            elif op == "answer":
                out.append(Answer(str(st["text"])))
            elif op == "terminate":
                out.append(Terminate())
            else:
                raise ValueError(f"plan step {i}: unknown op {op!r}")
        except (KeyError, TypeError, re.error) as exc:
            raise ValueError(f"plan step {i} ({op}): {type(exc).__name__}: {exc}") from None
    return tuple(out)


class LLMTaskWriter:
    """Asks an OpenAI-compatible chat endpoint for whole new tasks (instruction, checks, plan) over a world.
    Each proposal becomes a draft with a ``checks`` verifier; the caller pre-checks it with the planner and
    validates it live like every other task."""

    def __init__(self, para: LLMParaphraser, apps: list[str], n: int = 3) -> None:
        self.para, self.apps, self.n = para, apps, n

    async def drafts(self, world: Any) -> tuple[list[Any], list[Rejection]]:
        """Drafts for ``world`` (template ``llm``) and the proposals rejected as malformed."""
        from maigym_ray.synth.drafts import Draft

        seeds = world.seeds()
        facts_json = json.dumps({a: seeds[a] for a in self.apps if a in seeds})[:6000]
        prompt = TASK_PROMPT.format(
            apps=", ".join(self.apps), facts=facts_json, n=self.n, example=json.dumps(EXAMPLE_TASK)
        )
        body = {
            "model": self.para.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.7,
        }
        rejected: list[Rejection] = []
        async with aiohttp.ClientSession(timeout=self.para.timeout) as session:
            try:
                async with session.post(self.para.url, json=body, headers=self.para.headers) as resp:
                    if resp.status != 200:
                        raise RuntimeError(f"HTTP {resp.status}")
                    content = (await resp.json())["choices"][0]["message"]["content"] or ""
            except (aiohttp.ClientError, TimeoutError, RuntimeError, KeyError, IndexError, ValueError) as exc:
                return [], [
                    Rejection(f"llm-w{world.seed}", "llm", "llm_error", f"{type(exc).__name__}: {exc}")
                ]
        out = []
        for k, line in enumerate(ln for ln in content.splitlines() if ln.strip()):
            tid = f"llm-w{world.seed}-{k}"
            try:
                d = json.loads(line)
                if not isinstance(d, dict) or set(d) != PROPOSAL_KEYS:
                    got = sorted(d) if isinstance(d, dict) else type(d).__name__
                    raise ValueError(f"a proposal has exactly the keys {sorted(PROPOSAL_KEYS)}; got {got}")
                apps = tuple(str(a) for a in d["apps"])
                if not apps or not set(apps) <= set(self.apps) or d["kind"] not in ("info", "state"):
                    raise ValueError(f"apps {apps} / kind {d.get('kind')!r} not allowed")
                verifier = checks_from_json(d["checks"], apps)
                out.append(
                    Draft(
                        "llm",
                        str(d["instruction"]),
                        apps,
                        d["kind"],
                        (),
                        plan_from_json(d["plan"]),
                        task_id=tid,
                        verifier=verifier,
                        tags=("llm_written",),
                    )
                )
            except (ValueError, KeyError, TypeError, TaskError) as exc:
                rejected.append(
                    Rejection(tid, "llm", "llm_bad_proposal", f"{type(exc).__name__}: {exc}"[:300])
                )
        return out, rejected
