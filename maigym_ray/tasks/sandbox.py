"""Sandboxed verifier code: synthesised (e.g. LLM-written) verifiers run in a separate, limited process.

A ``code`` verifier is Python source that defines ``verify(states, answer)`` returning a bool or a number in
[0, 1]. It is untrusted, so it never runs in the caller's process. :func:`run_sandboxed` starts a fresh
interpreter (``python -I``: no user site, no environment) in its own session and temporary directory with:

- a CPU-time limit and a wall-clock timeout (the process group is killed when either passes);
- an address-space limit (``memory_mb``), no file writes (``RLIMIT_FSIZE`` 0), few open files, no new
  processes (``RLIMIT_NPROC`` 0);
- builtins restricted to pure data functions: no ``open``, no ``__import__``, no ``eval``/``exec``.

States and the answer go in as JSON on stdin; the verdict comes back as JSON on stdout. Anything else (a
timeout, a crash, a non-JSON reply, an exception inside ``verify``) raises :class:`TaskError` that says what
happened: a broken verifier is a task error, never a silent 0. These limits stop runaway and careless code;
they are not a jail against a determined attacker (no seccomp or namespaces), which is why only synthesised
verifiers, never model output, are run here, and only after they pass validation.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import TaskError
from maigym_ray.types import Reward

# The child's program. Kept as a string so the child imports nothing from this package.
_RUNNER = r"""
import json, sys
SAFE = {n: __builtins__.__dict__[n] if hasattr(__builtins__, "__dict__") else __builtins__[n] for n in (
    "abs all any bool dict enumerate filter float frozenset int isinstance len list map max min range "
    "reversed round set sorted str sum tuple zip ValueError KeyError TypeError Exception True False None"
).split()}
req = json.loads(sys.stdin.read())
scope = {"__builtins__": SAFE}
try:
    exec(compile(req["code"], "<verifier>", "exec"), scope)  # sandboxed: this child is the sandbox
    fn = scope.get("verify")
    if not callable(fn):
        raise ValueError("the code defines no verify(states, answer) function")
    out = fn(req["states"], req["answer"])
    if isinstance(out, bool):
        out = 1.0 if out else 0.0
    if not isinstance(out, (int, float)) or not 0.0 <= float(out) <= 1.0:
        raise ValueError(f"verify returned {out!r}; expected a bool or a number in [0, 1]")
    print(json.dumps({"value": float(out)}))
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""


def _limits(cpu_s: int, memory_mb: int) -> None:
    # Soft CPU limit (SIGXCPU) a second past the wall-clock timeout, hard limit (SIGKILL) a second later: a busy
    # loop normally meets the wall clock first; the CPU limit is the backstop if the parent cannot act.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def run_sandboxed(
    code: str, states: dict[str, Any], answer: str | None, timeout_s: float = 2.0, memory_mb: int = 256
) -> Reward:
    """Runs ``verify(states, answer)`` from ``code`` in a limited child process; raises TaskError on failure."""
    cpu = max(1, int(timeout_s + 0.999)) + 1
    with tempfile.TemporaryDirectory(prefix="maigym_verifier_") as cwd:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _RUNNER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={"PATH": "/usr/bin:/bin"},
            start_new_session=True,  # its own process group: a timeout kills everything it started
            preexec_fn=lambda: _limits(cpu, memory_mb),
        )
        try:
            out, err = proc.communicate(
                json.dumps({"code": code, "states": states, "answer": answer}).encode(), timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise TaskError(f"sandboxed verifier timed out after {timeout_s:.1f} s and was killed") from None
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise TaskError(f"sandboxed verifier timed out (CPU-time limit {cpu} s) and was killed")
    if proc.returncode != 0:
        raise TaskError(
            f"sandboxed verifier died (exit status {proc.returncode}): {err.decode(errors='replace')[-300:].strip()}"
        )
    try:
        reply = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise TaskError(
            f"sandboxed verifier replied with no verdict: {out.decode(errors='replace')[-200:]!r}"
        ) from None
    if "error" in reply:
        raise TaskError(f"sandboxed verifier raised {reply['error']}")
    value = float(reply["value"])
    return Reward(value, value >= 1.0, "sandboxed verifier")


@dataclass(frozen=True)
class CodeVerifier:
    """A verifier given as code (``{"name": "code", "params": {"code": ..., "timeout_s": 2, "memory_mb": 256}}``),
    always run through :func:`run_sandboxed`."""

    code: str
    timeout_s: float = 2.0
    memory_mb: int = 256

    def __post_init__(self) -> None:
        if not isinstance(self.code, str) or "def verify" not in self.code:
            raise TaskError("a code verifier needs params.code defining verify(states, answer)")

    def __call__(self, states: dict[str, Any], answer: str | None) -> Reward:
        return run_sandboxed(self.code, states, answer, self.timeout_s, self.memory_mb)
