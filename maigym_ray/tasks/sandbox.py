"""Verifier code in a jail: hand-written (trusted) ``code`` verifiers run in :mod:`maigym_ray.tasks.jail`.

A ``code`` verifier is Python source that defines ``verify(states, answer)`` returning a bool or a number in
[0, 1]. Model-written verifiers are never code (they are declarative ``checks``, see
:mod:`maigym_ray.tasks.verifiers`); still, code is treated as hostile: it never runs in the caller's process
and never outside the bubblewrap jail, and if the jail cannot run here, code verifiers refuse to run.

Inside the jail, the runner program below (trusted, tiny, stdlib only):

1. makes itself non-dumpable, so a process of the same uid can neither ptrace it nor open its
   ``/proc/<pid>/fd`` -- that is what keeps the reply pipe out of reach;
2. forks; the child closes the reply pipe, then runs the code with restricted builtins (a first layer only --
   the jail is the boundary) and writes its result to a private pipe;
3. accepts that result only if the child exited with status 0 and wrote exactly one JSON object of the
   expected shape, and sends the verdict as one frame on the reply pipe.

So printing a verdict, exiting early, crashing after writing, or writing twice all end in :class:`TaskError`
(a broken verifier is a task error, never a silent 0 and never a forged 1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from maigym_ray.errors import TaskError
from maigym_ray.tasks.jail import JailLimits, check_jail, run_jailed
from maigym_ray.types import Reward

# The jail's program. Kept as a string so the jail imports nothing from this package (it is not even bound).
_RUNNER = r"""
import ctypes, json, os, struct, sys
REPLY = int(sys.argv[1])
def send(obj):
    data = json.dumps(obj).encode()
    os.write(REPLY, struct.pack(">I", len(data)) + data)
    os.close(REPLY)
    os._exit(0)
if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
    sys.exit("runner: could not make itself non-dumpable")
req = json.loads(sys.stdin.buffer.read())
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(REPLY)
    os.close(r)
    SAFE = {n: __builtins__.__dict__[n] if hasattr(__builtins__, "__dict__") else __builtins__[n] for n in (
        "abs all any bool dict enumerate filter float frozenset int isinstance len list map max min range "
        "reversed round set sorted str sum tuple zip ValueError KeyError TypeError Exception True False None"
    ).split()}
    scope = {"__builtins__": SAFE}
    try:
        exec(compile(req["code"], "<verifier>", "exec"), scope)  # sandboxed: inside the bubblewrap jail
        fn = scope.get("verify")
        if not callable(fn):
            raise ValueError("the code defines no verify(states, answer) function")
        out = fn(req["states"], req["answer"])
        if isinstance(out, bool):
            out = 1.0 if out else 0.0
        if not isinstance(out, (int, float)) or not 0.0 <= float(out) <= 1.0:
            raise ValueError(f"verify returned {out!r}; expected a bool or a number in [0, 1]")
        msg = {"value": float(out)}
    except Exception as exc:
        msg = {"error": f"{type(exc).__name__}: {exc}"}
    os.write(w, json.dumps(msg).encode())
    os._exit(0)
os.close(w)
data = b""
while len(data) <= 65536:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
_, status = os.waitpid(pid, 0)
if status != 0:
    send({"error": f"the verifier process ended abnormally (wait status {status})"})
try:
    msg = json.loads(data)
except ValueError:
    send({"error": f"the verifier process wrote no single result ({len(data)} bytes)"})
ok = isinstance(msg, dict) and (
    (set(msg) == {"value"} and type(msg["value"]) is float and 0.0 <= msg["value"] <= 1.0)
    or (set(msg) == {"error"} and type(msg["error"]) is str)
)
send(msg if ok else {"error": "the verifier process wrote a malformed result"})
"""


def run_sandboxed(
    code: str, states: dict[str, Any], answer: str | None, timeout_s: float = 2.0, memory_mb: int = 256
) -> Reward:
    """Runs ``verify(states, answer)`` from ``code`` in the jail; raises TaskError on any failure."""
    check_jail()  # refuse (naming the fix) rather than ever run code unjailed
    request = json.dumps({"code": code, "states": states, "answer": answer}).encode()
    result = run_jailed(_RUNNER, request, JailLimits(timeout_s=timeout_s, memory_mb=memory_mb))
    try:
        reply = json.loads(result.reply)
        if not isinstance(reply, dict) or len(reply) != 1:
            raise ValueError(reply)
        if "error" in reply:
            raise TaskError(f"sandboxed verifier raised {reply['error']}")
        value = reply["value"]
        if type(value) is not float or not 0.0 <= value <= 1.0:
            raise ValueError(value)
    except (ValueError, KeyError):
        raise TaskError("sandboxed verifier's reply is malformed; rejected") from None
    return Reward(value, value >= 1.0, "sandboxed verifier")


@dataclass(frozen=True)
class CodeVerifier:
    """A verifier given as code (``{"name": "code", "params": {"code": ..., "timeout_s": 2, "memory_mb": 256}}``),
    always run in the jail through :func:`run_sandboxed`."""

    code: str
    timeout_s: float = 2.0
    memory_mb: int = 256

    def __post_init__(self) -> None:
        if not isinstance(self.code, str) or "def verify" not in self.code:
            raise TaskError("a code verifier needs params.code defining verify(states, answer)")

    def __call__(self, states: dict[str, Any], answer: str | None) -> Reward:
        return run_sandboxed(self.code, states, answer, self.timeout_s, self.memory_mb)
