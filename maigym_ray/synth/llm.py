"""Optional LLM-assisted synthesis: instruction paraphrases through any OpenAI-compatible chat endpoint.

Paraphrases add wording variety at no cost to correctness: a paraphrased task keeps its seeds, verifier and
golden solution, and only its instruction changes. Two guards keep it honest:

- :func:`keeps_facts`: every fact of the original instruction (quoted text, numbers, dates, times, emails,
  names) must appear verbatim in the paraphrase, or it is rejected as ``paraphrase_drops_facts``;
- the caller sends every paraphrased task through the same live validation as any other task, so nothing
  an LLM wrote enters a pool unchecked. (Verifier code an LLM writes would run as a ``code`` verifier, which
  only ever runs in the sandbox of :mod:`maigym_ray.tasks.sandbox`.)

A failed request is ``llm_error`` for that task; the run goes on.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any

import aiohttp

from maigym_ray.synth.generate import Rejection
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
