"""OSWorld-format tasks on the desktop backend: the importer, and the ``osworld`` backend kind that runs them.

An OSWorld task is one JSON object: ``id``, ``instruction``, ``config`` (the steps that set the desktop up)
and ``evaluator`` (``func`` over the values of the ``result`` and ``expected`` getters, with ``options``).
:func:`load_task` validates it against the subset below and turns it into a TaskSpec whose initial state
carries the steps and getters; anything outside the subset is a :class:`TaskError` naming the key, so a
task never half-runs. The backend is the desktop backend plus: reset runs the config steps through the guest
agent, and ``state()["osworld"]`` holds what the getters read, which the ``osworld`` verifier
(:mod:`maigym_ray.tasks.osworld_metrics`) scores.

Config steps (``type`` and its ``parameters``):

- ``launch`` {command, shell}: starts one of the desktop's apps (Chromium as ``google-chrome``/``chromium``
  with an optional URL, the editor as ``gedit``/``mousepad`` with an optional file, ``gnome-terminal``/
  ``xterm``); any other program is refused, since the desktop runs only its own apps;
- ``open`` {path}: opens a file in the editor;
- ``execute`` (or ``command``) {command, shell}: runs a command and waits for it (a non-zero exit or a
  timeout is a TaskError: a task whose set-up failed must not be scored);
- ``sleep`` {seconds}: waits (at most 10 s);
- ``download`` is refused: the desktop has no network.

Getters: ``vm_file`` {path} (the file's text; None when missing), ``vm_command_line`` {command, shell}
(stdout), ``vm_command_error`` {command, shell} (stderr), ``rule`` {rules} (the rules themselves).
``cloud_file`` and the other getters are refused. ``postconfig`` steps run before the getters.

Paths: the desktop's home is OSWorld's ``/home/user``, so ``/home/user/x`` is ``~/x``; paths outside home are
refused by the agent. Commands come from task files, which are trusted task data, not model output; they still
run only through the guest agent's ``/exec``: in the desktop (the VM, for libvirt), in its home, in a process
group of their own that is killed at the time limit and dies with the agent.

Pool specs: ``osworld:<file.json | folder>``; a folder loads every ``*.json`` but ``golden.json``, which maps
task ids to golden action lists in our grammar (OSWorld tasks carry none).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

from maigym_ray.envs.backend import Backend
from maigym_ray.envs.backends.desktop import DesktopBackend
from maigym_ray.envs.config import DesktopBackendConfig, PoolConfig
from maigym_ray.envs.desktop.provider import build_provider
from maigym_ray.envs.kinds import apps_handle, check_desktop
from maigym_ray.envs.registry import BackendKind, kind_options
from maigym_ray.errors import BackendError, ConfigError, TaskError
from maigym_ray.tasks.osworld_metrics import build_osworld_verifier
from maigym_ray.types import TaskSpec

#: Top-level keys of an OSWorld task: those we use, and those that only describe it (accepted, unused).
TASK_KEYS = ("id", "instruction", "config", "evaluator")
INFO_KEYS = (
    "snapshot",
    "source",
    "trajectory",
    "related_apps",
    "possibility_of_env_change",
    "proxy",
    "fixed_ip",
)
EVALUATOR_KEYS = ("func", "result", "expected", "options", "conj", "postconfig")
#: step type -> the parameters it takes.
STEP_PARAMS: dict[str, tuple[str, ...]] = {
    "launch": ("command", "shell"),
    "open": ("path",),
    "execute": ("command", "shell"),
    "command": ("command", "shell"),
    "sleep": ("seconds",),
}
#: getter type -> the keys it takes besides ``type`` (``dest`` is OSWorld's local copy name, unused here).
GETTER_KEYS: dict[str, tuple[str, ...]] = {
    "vm_file": ("path", "dest"),
    "vm_command_line": ("command", "shell"),
    "vm_command_error": ("command", "shell"),
    "rule": ("rules",),
}
_NEEDS_NETWORK = {"download": "config step", "cloud_file": "getter"}
#: program names ``launch`` accepts -> the desktop app it starts.
LAUNCHABLE = {
    "google-chrome": "browser",
    "chromium": "browser",
    "chromium-browser": "browser",
    "gedit": "editor",
    "mousepad": "editor",
    "gnome-terminal": "terminal",
    "xterm": "terminal",
}
SLEEP_CAP_S = 10.0
COMMAND_TIMEOUT_S = 20.0
DEFAULT_MAX_STEPS = 15


def guest_path(path: str) -> str:
    """OSWorld's ``/home/user/...`` as a path under the desktop's home (``~/...``)."""
    for home in ("/home/user/", "/root/"):
        if path.startswith(home):
            return "~/" + path[len(home) :]
    return path


def _keys(obj: Any, allowed: tuple[str, ...], where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TaskError(f"{where} must be an object, got {type(obj).__name__}")
    for key in obj:
        if key not in allowed:
            raise TaskError(f"{where}: key {key!r} is not supported; supported: {', '.join(allowed)}")
    return obj


def _command(params: dict[str, Any], where: str) -> dict[str, Any]:
    cmd, shell = params.get("command"), bool(params.get("shell", False))
    if isinstance(cmd, str):
        argv: Any = cmd if shell else shlex.split(cmd)
    elif isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
        argv = " ".join(shlex.quote(c) for c in cmd) if shell else cmd
    else:
        raise TaskError(f"{where}: command must be a string or a non-empty list of strings")
    return {"argv": argv, "shell": shell}


def _step(step: Any, where: str) -> dict[str, Any]:
    """One validated config step in the form the backend runs."""
    kind = step.get("type") if isinstance(step, dict) else None
    if kind in _NEEDS_NETWORK:
        raise TaskError(f"{where}: {_NEEDS_NETWORK[kind]} {kind!r} needs the network; the desktop has none")
    if kind not in STEP_PARAMS:
        raise TaskError(f"{where}: step type {kind!r} is not supported; supported: {', '.join(STEP_PARAMS)}")
    _keys(step, ("type", "parameters"), where)
    params = _keys(step.get("parameters", {}), STEP_PARAMS[kind], f"{where}.parameters")
    if kind == "sleep":
        secs = params.get("seconds")
        if not isinstance(secs, int | float) or secs < 0:
            raise TaskError(f"{where}: sleep needs seconds >= 0")
        return {"type": "sleep", "seconds": min(float(secs), SLEEP_CAP_S)}
    if kind == "open":
        if not isinstance(params.get("path"), str):
            raise TaskError(f"{where}: open needs a path")
        return {"type": "open", "path": guest_path(params["path"])}
    cmd = _command(params, where)
    if kind in ("execute", "command"):
        return {"type": "execute", **cmd}
    words = shlex.split(cmd["argv"]) if isinstance(cmd["argv"], str) else cmd["argv"]
    program = Path(words[0]).name
    if program not in LAUNCHABLE:
        raise TaskError(
            f"{where}: launch of {program!r} is not supported; the desktop launches {', '.join(LAUNCHABLE)}"
        )
    args = [w for w in words[1:] if not w.startswith("-")]
    app = LAUNCHABLE[program]
    return {
        "type": "launch",
        "app": app,
        "url": args[0] if app == "browser" and args else "",
        "path": guest_path(args[0]) if app == "editor" and args else "",
    }


def _getter(g: Any, where: str) -> dict[str, Any]:
    kind = g.get("type") if isinstance(g, dict) else None
    if kind in _NEEDS_NETWORK:
        raise TaskError(f"{where}: {_NEEDS_NETWORK[kind]} {kind!r} needs the network; the desktop has none")
    if kind not in GETTER_KEYS:
        raise TaskError(
            f"{where}: getter type {kind!r} is not supported; supported: {', '.join(GETTER_KEYS)}"
        )
    _keys(g, ("type", *GETTER_KEYS[kind]), where)
    if kind == "rule":
        return {"type": "rule", "rules": g.get("rules")}
    if kind == "vm_file":
        if not isinstance(g.get("path"), str):
            raise TaskError(f"{where}: vm_file needs a path")
        return {"type": "vm_file", "path": guest_path(g["path"])}
    return {"type": kind, **_command(g, where)}


def _as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def load_task(raw: dict[str, Any], golden: list[str] | tuple[str, ...] = (), where: str = "task") -> TaskSpec:
    """An OSWorld-format task as a TaskSpec for the ``osworld`` backend; TaskError names an unsupported key."""
    _keys(raw, (*TASK_KEYS, *INFO_KEYS), where)
    for key in ("id", "instruction"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise TaskError(f"{where}: {key!r} must be a non-empty string")
    where = f"task {raw['id']}"
    if raw.get("proxy") or raw.get("fixed_ip"):
        raise TaskError(f"{where}: 'proxy' and 'fixed_ip' need the network; the desktop has none")
    steps = raw.get("config", [])
    if not isinstance(steps, list):
        raise TaskError(f"{where}: config must be a list of steps")
    config = [_step(s, f"{where} config[{i}]") for i, s in enumerate(steps)]
    ev = _keys(raw.get("evaluator"), EVALUATOR_KEYS, f"{where} evaluator")
    funcs = _as_list(ev.get("func"))
    results = _as_list(ev.get("result"))
    expected = _as_list(ev.get("expected", [None] * len(funcs)))
    if not (len(funcs) == len(results) == len(expected)):
        raise TaskError(f"{where} evaluator: func, result and expected must have the same length")
    params = {"func": funcs, "options": ev.get("options", {}), "conj": ev.get("conj", "and")}
    build_osworld_verifier(params)  # checks func names and options now, not at the first evaluate
    post = ev.get("postconfig", [])
    if not isinstance(post, list):
        raise TaskError(f"{where} evaluator: postconfig must be a list of steps")
    return TaskSpec(
        id=f"osworld.{raw['id']}",
        instruction=raw["instruction"],
        apps=("osworld",),
        platforms=("desktop",),
        initial_state={
            "osworld": {
                "config": config,
                "postconfig": [_step(s, f"{where} evaluator.postconfig[{i}]") for i, s in enumerate(post)],
                "result": [_getter(g, f"{where} evaluator.result[{i}]") for i, g in enumerate(results)],
                "expected": [
                    None if g is None else _getter(g, f"{where} evaluator.expected[{i}]")
                    for i, g in enumerate(expected)
                ],
            }
        },
        verifier={"name": "osworld", "params": params},
        golden=tuple(golden),
        max_steps=DEFAULT_MAX_STEPS,
        tags=("osworld", *([raw["snapshot"]] if isinstance(raw.get("snapshot"), str) else [])),
    )


def load_path(path: str | Path) -> list[TaskSpec]:
    """The tasks of one OSWorld-format JSON file, or of every ``*.json`` in a folder (with its golden.json)."""
    path = Path(path)
    if not path.exists():
        raise TaskError(f"OSWorld task path {path} does not exist")
    files = sorted(p for p in path.glob("*.json") if p.name != "golden.json") if path.is_dir() else [path]
    gold_file = (path if path.is_dir() else path.parent) / "golden.json"
    golden = json.loads(gold_file.read_text()) if gold_file.is_file() else {}
    tasks = []
    for f in files:
        try:
            raw = json.loads(f.read_text())
        except json.JSONDecodeError as exc:
            raise TaskError(f"{f}: not JSON ({exc})") from exc
        tid = raw.get("id") if isinstance(raw, dict) else None
        tasks.append(load_task(raw, golden.get(tid, ()), where=str(f)))
    return tasks


def load_pool_spec(spec: str) -> list[TaskSpec]:
    """The tasks of ``osworld:<file or folder>`` (registered in tasks.pool.POOL_SOURCES)."""
    if not spec.startswith("osworld:"):
        raise ConfigError(f"not an OSWorld pool spec: {spec!r} (expected osworld:<file.json or folder>)")
    return load_path(spec.split(":", 1)[1])


class OsworldBackend(DesktopBackend):
    """The desktop backend that also runs an OSWorld task's config steps and evaluator getters."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._spec: dict[str, Any] = {}

    async def reset(self, task: TaskSpec) -> None:
        spec = task.initial_state.get("osworld")
        if not isinstance(spec, dict):
            raise TaskError(
                f"task {task.id}: an osworld task needs initial_state.osworld (load it with load_task)"
            )
        rest = {k: v for k, v in task.initial_state.items() if k != "osworld"}
        await super().reset(dataclasses.replace(task, initial_state=rest))
        self._spec = spec
        for i, step in enumerate(spec.get("config", [])):
            await self._run_step(step, f"task {task.id} config[{i}]")

    async def _run_step(self, step: dict[str, Any], where: str) -> None:
        agent = self._agent()
        kind = step["type"]
        if kind == "sleep":
            await asyncio.sleep(step["seconds"])
            return
        if kind in ("open", "launch"):
            app = "editor" if kind == "open" else step["app"]
            try:
                error = await agent.launch(app, url=step.get("url", ""), path=step.get("path", ""))
            except PermissionError as exc:
                error = str(exc)
            if error:
                raise TaskError(f"{where}: {kind} failed: {error}")
            return
        res = await self._exec(step, where)
        if res["timed_out"] or res["rc"] != 0:
            raise TaskError(
                f"{where}: command {step['argv']!r} "
                + ("timed out" if res["timed_out"] else f"exited {res['rc']}: {res['stderr'][-300:]}")
            )

    async def _exec(self, cmd: dict[str, Any], where: str) -> dict[str, Any]:
        try:
            return await self._agent().run_command(cmd["argv"], COMMAND_TIMEOUT_S, shell=cmd["shell"])
        except BackendError:
            raise
        except (PermissionError, ValueError) as exc:
            raise TaskError(f"{where}: {exc}") from exc

    async def _get(self, getter: dict[str, Any] | None, where: str) -> Any:
        if getter is None:
            return None
        kind = getter["type"]
        if kind == "rule":
            return getter["rules"]
        if kind == "vm_file":
            try:
                data = await self._agent().get_file(getter["path"])
            except FileNotFoundError:
                return None
            except PermissionError as exc:
                raise TaskError(f"{where}: {getter['path']!r}: {exc}") from exc
            return data.decode("utf-8", errors="backslashreplace")
        res = await self._exec(getter, where)
        if res["timed_out"]:
            return None
        return res["stdout"] if kind == "vm_command_line" else res["stderr"]

    async def state(self) -> dict[str, Any]:
        states = await super().state()
        if self._spec:
            for i, step in enumerate(self._spec.get("postconfig", [])):
                await self._run_step(step, f"postconfig[{i}]")
            states["osworld"] = {
                side: [await self._get(g, f"evaluator.{side}[{i}]") for i, g in enumerate(self._spec[side])]
                for side in ("result", "expected")
            }
        return states


def build_backend(
    pool: PoolConfig, apps: list[str], app_bind: str = "127.0.0.1", node: Any = None
) -> Backend:
    """The ``osworld`` backend kind's builder: the pool's desktop settings and provider."""
    options = kind_options(pool)
    return OsworldBackend(options, apps_handle(apps, app_bind, node), build_provider(options))


#: The ``osworld`` backend kind: OSWorld-format tasks on the desktop, with the pool's desktop settings.
KIND = BackendKind(build=build_backend, check=check_desktop, options=DesktopBackendConfig)
