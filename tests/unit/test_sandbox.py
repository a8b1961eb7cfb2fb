"""Unit tests for sandboxed verifier code (maigym_ray/tasks/sandbox.py): limits, errors, the ``code`` verifier."""

from __future__ import annotations

import time

import pytest

from maigym_ray.errors import TaskError
from maigym_ray.tasks.sandbox import run_sandboxed
from maigym_ray.tasks.verifiers import build_verifier, run_verifier

pytestmark = pytest.mark.unit

GOOD = """
def verify(states, answer):
    sent = [m for m in states["mail"]["messages"] if m["folder"] == "sent"]
    return any(m["to"] == "bob@example.com" for m in sent)
"""


def _code(body: str, **params: object) -> dict[str, object]:
    return {"name": "code", "params": {"code": body, **params}}


def test_code_verifier_reads_states_and_answer() -> None:
    states = {"mail": {"messages": [{"folder": "sent", "to": "bob@example.com"}]}}
    assert run_verifier(_code(GOOD), states, None).success
    assert not run_verifier(_code(GOOD), {"mail": {"messages": []}}, None).success
    half = run_verifier(_code("def verify(states, answer):\n    return 0.5 if answer == 'x' else 0"), {}, "x")
    assert half.value == 0.5 and not half.success


def test_a_verifier_that_loops_forever_is_killed_and_reported_quickly() -> None:
    t0 = time.perf_counter()
    with pytest.raises(TaskError, match=r"timed out (after 1\.0 s|\(CPU-time limit 2 s\)) and was killed"):
        run_verifier(
            _code("def verify(states, answer):\n    while True:\n        pass", timeout_s=1.0), {}, None
        )
    assert time.perf_counter() - t0 < 5.0  # the run goes on; nothing hangs


def test_sandbox_has_no_files_imports_or_eval() -> None:
    for body, why in (
        ("def verify(s, a):\n    return open('/etc/passwd').read() != ''", "open"),
        ("import os\ndef verify(s, a):\n    return 1", "__import__"),
        ("def verify(s, a):\n    return eval('1')", "eval"),
    ):
        with pytest.raises(TaskError, match=why):
            run_sandboxed(body, {}, None)


def test_memory_limit_stops_a_runaway_allocation() -> None:
    with pytest.raises(TaskError, match=r"MemoryError|died"):
        run_sandboxed("def verify(s, a):\n    x = [0] * (10**9)\n    return 1", {}, None, memory_mb=256)


def test_bad_verifier_code_is_a_clear_task_error() -> None:
    with pytest.raises(TaskError, match=r"needs params\.code defining verify"):
        build_verifier(_code("x = 1"))
    with pytest.raises(TaskError, match="verify returned 'yes'"):
        run_verifier(_code("def verify(s, a):\n    return 'yes'"), {}, None)
    with pytest.raises(TaskError, match="KeyError"):
        run_verifier(_code("def verify(s, a):\n    return s['nope']"), {}, None)
