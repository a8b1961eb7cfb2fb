"""FakeBackend: a scripted Backend for unit tests, conformance tests and fault drills.

It keeps a tiny app state (``{"fake": {"screen", "clicks", "typed", "actions", "clicked"}}``, ``clicked``
holding one ``{"id": ...}`` record per click) that verifiers can read, cycles through the configured screens
(or the task's own, ``initial_state["fake"]["screens"]``: task families on the fake), and fails on demand:

- in process, ``backend.inject(op, kind)`` arms a one-shot fault;
- across processes (env actors in Ray workers), a file ``<faults_dir>/<op>.<kind>`` is claimed (unlinked) by the
  first instance that runs ``op``, so exactly one instance fails per file planted (:func:`plant_fault`).

Kinds: ``error`` raises BackendError, ``hang`` sleeps for an hour (the caller's timeout must fire), ``die``
ends the process at once (``os._exit``), which is what a crashed env actor looks like to Ray.
"""

from __future__ import annotations

import asyncio
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maigym_ray.envs.backend import Backend
from maigym_ray.envs.registry import BackendKind, kind_options
from maigym_ray.errors import BackendError
from maigym_ray.types import Action, Observation, TaskSpec

FAULT_OPS = ("start", "reset", "observe", "act", "state", "health")
FAULT_KINDS = ("error", "hang", "die")
_WIDTH, _HEIGHT = 64, 48


@dataclass
class FakeBackendConfig:
    """The ``fake`` backend kind's settings (a pool's ``options``): fast tests and fault injection, no device."""

    #: screens the fake cycles through, one accessibility text each; every successful action moves to the next.
    screens: list[str] = field(default_factory=lambda: ["[1] button 'Next'", "[1] button 'Done'"])
    #: seconds every act/reset takes (stands in for device latency).
    delay_s: float = 0.0
    #: a folder of one-shot faults shared by every instance: a file named "<op>.<kind>" (op: start, reset,
    #: observe, act, state, health; kind: error, hang, die) is claimed by the first instance to run op, which
    #: then raises BackendError, hangs, or kills its process. "" = no faults.
    faults_dir: str = ""


def _png(width: int, height: int, shade: int) -> bytes:
    """A valid grey PNG (stdlib only: the fake must not need Pillow)."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    rows = b"".join(b"\x00" + bytes([shade]) * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def plant_fault(faults_dir: str | Path, op: str, kind: str) -> Path:
    """Arms a one-shot fault for the next instance (of any process) that runs ``op``."""
    if op not in FAULT_OPS or kind not in FAULT_KINDS:
        raise ValueError(f"fault {op}.{kind}: op one of {FAULT_OPS}, kind one of {FAULT_KINDS}")
    path = Path(faults_dir) / f"{op}.{kind}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path


class FakeBackend(Backend):
    """One fake device on ``platform``; see the module docstring for its state and faults."""

    def __init__(self, cfg: FakeBackendConfig | None = None, platform: str = "web") -> None:
        self.cfg = cfg or FakeBackendConfig()
        self.platform = platform
        self.started = False
        self.closed = False
        self.calls: dict[str, int] = dict.fromkeys(FAULT_OPS, 0)
        self._armed: list[tuple[str, str]] = []
        self._state: dict[str, Any] = {}
        self._screens: list[str] = []
        self._reset_state()

    def _reset_state(self) -> None:
        self._state = {"screen": 0, "clicks": 0, "typed": "", "actions": [], "clicked": []}

    def inject(self, op: str, kind: str) -> None:
        """Arms a one-shot fault on this instance's next ``op`` (in-process tests)."""
        if op not in FAULT_OPS or kind not in FAULT_KINDS:
            raise ValueError(f"fault {op}.{kind}: op one of {FAULT_OPS}, kind one of {FAULT_KINDS}")
        self._armed.append((op, kind))

    def _claim(self, op: str) -> str:
        for i, (o, kind) in enumerate(self._armed):
            if o == op:
                del self._armed[i]
                return kind
        if self.cfg.faults_dir:
            for kind in FAULT_KINDS:
                try:  # unlink is atomic: exactly one instance claims a planted fault
                    os.unlink(Path(self.cfg.faults_dir) / f"{op}.{kind}")
                    return kind
                except FileNotFoundError:
                    continue
        return ""

    async def _enter(self, op: str) -> None:
        self.calls[op] += 1
        kind = self._claim(op)
        if kind == "error":
            raise BackendError(f"fake {op} failed (injected)")
        if kind == "hang":
            await asyncio.sleep(3600)
        if kind == "die":
            os._exit(17)

    def _check_up(self) -> None:
        if not self.started or self.closed:
            raise BackendError("the fake device is not running")

    async def start(self) -> None:
        await self._enter("start")
        self.started, self.closed = True, False

    async def reset(self, task: TaskSpec) -> None:
        await self._enter("reset")
        self._check_up()
        if self.cfg.delay_s:
            await asyncio.sleep(self.cfg.delay_s)
        self._reset_state()
        self._screens = list(task.initial_state.get("fake", {}).get("screens", []))

    async def observe(self) -> Observation:
        await self._enter("observe")
        self._check_up()
        screens = self._screens or self.cfg.screens or [""]
        screen = self._state["screen"] % len(screens)
        return Observation(
            platform=self.platform,
            screenshot=_png(_WIDTH, _HEIGHT, (40 * screen) % 256),
            width=_WIDTH,
            height=_HEIGHT,
            a11y=screens[screen],
            url=f"fake://screen/{screen}",
        )

    async def act(self, action: Action) -> str:
        await self._enter("act")
        self._check_up()
        if self.cfg.delay_s:
            await asyncio.sleep(self.cfg.delay_s)
        self._state["actions"].append(action.to_text())
        if action.name == "click":
            self._state["clicks"] += 1
            self._state["clicked"].append({"id": str(action.args.get("id", ""))})
        elif action.name == "type":
            self._state["typed"] += str(action.args.get("text", ""))
        self._state["screen"] += 1
        return ""

    async def state(self) -> dict[str, Any]:
        await self._enter("state")
        self._check_up()
        return {
            "fake": {
                **self._state,
                "actions": list(self._state["actions"]),
                "clicked": [dict(c) for c in self._state["clicked"]],
            }
        }

    async def health(self) -> bool:
        try:
            await self._enter("health")
        except BackendError:
            return False
        return self.started and not self.closed

    async def close(self) -> None:
        self.closed = True


def fake_task(
    task_id: str = "fake-answer",
    answer: str = "42",
    verifier: dict[str, Any] | None = None,
    max_steps: int = 5,
    platform: str = "web",
) -> TaskSpec:
    """A task the fake backend can run: click, then answer ``answer``; the verifier checks the answer (a
    broken ``verifier`` spec makes evaluate raise TaskError, the "verifier that raises" of fault drills)."""
    return TaskSpec(
        id=task_id,
        instruction=f"Click Next, then answer {answer}.",
        apps=("fake",),
        platforms=(platform,),
        verifier=verifier
        if verifier is not None
        else {"name": "checks", "params": {"checks": [{"op": "answer", "any_of": [answer]}]}},
        golden=('click(id="1")', f'answer(text="{answer}")', 'terminate(status="success")'),
        max_steps=max_steps,
    )


def build_fake(pool: Any, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None) -> FakeBackend:
    """The ``fake`` backend kind's builder: no device, scripted screens, injected faults (the pool's
    ``options`` are its FakeBackendConfig)."""
    return FakeBackend(kind_options(pool), pool.platform)


#: The ``fake`` backend kind, registered by this package's entry point (group ``maigym_ray.backends``) like a
#: user's plug-in: production code never imports the fakes, and the production schema holds none of its settings.
KIND = BackendKind(build=build_fake, options=FakeBackendConfig)
