"""The android backend: a ReDroid container per instance (docker SDK), driven over adb.

- **Container**: ``docker run --privileged <image> androidboot.redroid_width=W androidboot.redroid_height=H
  androidboot.redroid_dpi=D androidboot.redroid_gpu_mode=M ...`` with /data on a fresh per-instance overlay (a
  host folder under ``data_root``, optionally copied from ``data_template``, or a docker volume), a memory
  limit, and either bridge networking (adbd's 5555 published on ``adb_host``) or host networking (adbd's port
  passed as ``MAIGYM_ADB_PORT``). Boot is done when ``getprop sys.boot_completed`` answers 1; a container that
  does not get there within ``boot_timeout_s`` (or exits) raises :class:`BackendError` naming it.
- **adb**: the real ``adb`` client (one adb server per node, on loopback) with ``adb connect host:port``;
  every device command is one ``adb shell`` / ``adb exec-out`` call. Screenshots are ``screencap -p``;
  the accessibility text comes from ``uiautomator dump`` (:func:`parse_hierarchy`): one ``[id] role "name"``
  line per useful node, ids being resource-id names where there is one and ``eN`` otherwise.
- **Actions** (every action of ``PLATFORM_ACTIONS["android"]``): ``input tap|swipe|text|keyevent|draganddrop``;
  targets are element ids (the centre of the node's bounds, from the last observation) or x/y normalised
  to 0..1000. ``open_app`` starts ``app_components[name]`` with ``am start -n``; a mocked app without a
  component opens in the browser (``am start -a android.intent.action.VIEW -d <its URL>``), at
  ``apps_address``. The control endpoints stay behind the app host's secret, which never reaches the device.
- **Reset**: ``recreate`` (a new container on a fresh /data) or ``pm_clear`` (``pm clear`` of
  ``clear_packages`` and the home key); either way the mocked apps' state is restored server-side. After
  ``recycle_after`` episodes on one container the next reset recreates it whatever the mode.

Agent mistakes (an unknown element id, an unknown app, text adb cannot type) come back as strings; adb and
docker failures raise :class:`BackendError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import shlex
import shutil
import socket
import struct
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from xml.etree import ElementTree

from maigym_ray.envs.backend import Backend
from maigym_ray.envs.backends.web import AppsHandle
from maigym_ray.envs.config import AndroidBackendConfig
from maigym_ray.errors import AppError, BackendError, TaskError
from maigym_ray.types import Action, Element, Observation, TaskSpec

#: The grammar's key names as Android keycodes (``input keyevent``).
KEYCODES: dict[str, int] = {
    "Enter": 66,
    "Tab": 61,
    "Escape": 111,
    "Backspace": 67,
    "Delete": 112,
    "Space": 62,
    "ArrowUp": 19,
    "ArrowDown": 20,
    "ArrowLeft": 21,
    "ArrowRight": 22,
    "Home": 122,
    "End": 123,
    "PageUp": 92,
    "PageDown": 93,
    "Control": 113,
    "Shift": 59,
    "Alt": 57,
    "Meta": 117,
    **{chr(c): 29 + c - ord("a") for c in range(ord("a"), ord("z") + 1)},
    **{str(d): 7 + d for d in range(10)},
    **{f"F{i}": 130 + i for i in range(1, 13)},
}
KEY_BACK, KEY_HOME, KEY_ENTER, KEY_DEL, KEY_MOVE_END = 4, 3, 66, 67, 123

#: Roles of widget classes (by the class name's last part); clickable unknown classes are buttons.
ROLES: dict[str, str] = {
    "EditText": "textbox",
    "AutoCompleteTextView": "textbox",
    "MultiAutoCompleteTextView": "textbox",
    "CheckBox": "checkbox",
    "CheckedTextView": "checkbox",
    "RadioButton": "radio",
    "Switch": "switch",
    "SwitchCompat": "switch",
    "ToggleButton": "switch",
    "Button": "button",
    "ImageButton": "button",
    "FloatingActionButton": "button",
    "SeekBar": "slider",
    "RatingBar": "slider",
    "Spinner": "combobox",
    "ImageView": "image",
    "WebView": "webview",
    "ScrollView": "scrollable",
    "HorizontalScrollView": "scrollable",
    "RecyclerView": "list",
    "ListView": "list",
    "GridView": "list",
    "TabWidget": "tablist",
    "ProgressBar": "progressbar",
    "TextView": "text",
}
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:-]")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _role(cls: str, clickable: bool) -> str:
    role = ROLES.get(cls.rsplit(".", 1)[-1])
    return role or ("button" if clickable else "group")


def _clean(text: str, limit: int = 100) -> str:
    return " ".join(text.split()).replace('"', "'")[:limit]


def parse_hierarchy(xml: str) -> tuple[str, list[Element], str]:
    """A ``uiautomator dump`` as (accessibility lines, elements, foreground package).

    Nodes are listed when they can be acted on (clickable, long-clickable, checkable, scrollable, editable)
    or say something (text or content-desc), and have a non-empty box. Raises ValueError on output that holds
    no hierarchy.
    """
    start = xml.find("<hierarchy")
    end = xml.rfind("</hierarchy>")
    if start < 0 or end < 0:
        raise ValueError(f"no UI hierarchy in the dump output: {xml[:200]!r}")
    try:
        root = ElementTree.fromstring(xml[start : end + len("</hierarchy>")])
    except ElementTree.ParseError as exc:
        raise ValueError(f"unparsable UI hierarchy: {exc}") from exc
    lines: list[str] = []
    elements: list[Element] = []
    seen: dict[str, int] = {}
    package = ""
    ordinal = 0
    for node in root.iter("node"):
        a = node.attrib
        package = package or a.get("package", "")
        m = _BOUNDS.fullmatch(a.get("bounds", ""))
        if not m:
            continue
        x1, y1, x2, y2 = (int(v) for v in m.groups())
        if x2 <= x1 or y2 <= y1:
            continue

        def flag(key: str, a: dict[str, str] = a) -> bool:
            return a.get(key) == "true"

        cls = a.get("class", "")
        role = _role(cls, flag("clickable"))
        text, desc, hint = (
            _clean(a.get("text", "")),
            _clean(a.get("content-desc", "")),
            _clean(a.get("hint", "")),
        )
        rid = a.get("resource-id", "")
        short = rid.split(":id/", 1)[-1] if rid else ""
        actionable = any(flag(k) for k in ("clickable", "long-clickable", "checkable", "scrollable"))
        if not (actionable or role == "textbox" or text or desc):
            continue
        value = ""
        if role == "textbox":
            name, value = desc or hint or short.replace("_", " "), text
        else:
            name = text or desc or hint
        ordinal += 1
        base = _ID_CHARS.sub("_", short)[:60] if short else f"e{ordinal}"
        seen[base] = seen.get(base, 0) + 1
        eid = base if seen[base] == 1 else f"{base}_{seen[base]}"
        line = f'[{eid}] {role} "{name}"'
        if role == "textbox":
            line += f' value="{value}"'
        if flag("checkable") and flag("checked"):
            line += " checked"
        for key in ("selected", "focused"):
            if flag(key):
                line += f" {key}"
        if a.get("enabled") == "false":
            line += " disabled"
        if flag("scrollable") and role not in ("list", "scrollable"):
            line += " scrollable"
        lines.append(line)
        elements.append(Element(eid, role, name, (x1 + x2) // 2, (y1 + y2) // 2, x2 - x1, y2 - y1, value))
    return "\n".join(lines), elements, package


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG; ValueError when ``data`` is not one."""
    if not data.startswith(_PNG_SIGNATURE) or len(data) < 24 or data[12:16] != b"IHDR":
        raise ValueError(f"not a PNG: {data[:40]!r}")
    return struct.unpack(">II", data[16:24])


def boot_args(cfg: AndroidBackendConfig) -> list[str]:
    """ReDroid's boot arguments (the container command) for ``cfg``."""
    args = []
    for key, value in (("width", cfg.width), ("height", cfg.height), ("dpi", cfg.dpi), ("fps", cfg.fps)):
        if value:
            args.append(f"androidboot.redroid_{key}={value}")
    args.append(f"androidboot.redroid_gpu_mode={cfg.gpu_mode}")
    return args + list(cfg.extra_args)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class AdbClient:
    """The real ``adb`` client binary, talking to the adb server on ``server_port`` (loopback)."""

    _servers: set[tuple[str, int]] = set()  # noqa: RUF012  (servers this process started, per path and port)

    def __init__(self, path: str = "adb", server_port: int = 5037, timeout_s: float = 30.0) -> None:
        self.path, self.server_port, self.timeout_s = path, server_port, timeout_s

    async def run(
        self, *args: str, serial: str = "", timeout_s: float | None = None
    ) -> tuple[int, bytes, bytes]:
        """Runs one adb command; returns (exit status, stdout, stderr). Raises BackendError on a timeout."""
        argv = [self.path, "-P", str(self.server_port), *(["-s", serial] if serial else []), *args]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise BackendError(f"cannot run {self.path!r} (apt-get install adb): {exc}") from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_s or self.timeout_s)
        except TimeoutError as exc:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise BackendError(f"adb {' '.join(args)[:80]} on {serial or 'the server'} timed out") from exc
        return proc.returncode or 0, out, err

    async def ensure_server(self) -> None:
        """Starts the adb server once per process (its output to /dev/null, so no pipe outlives a call)."""
        key = (self.path, self.server_port)
        if key in self._servers:
            return
        try:
            proc = await asyncio.create_subprocess_exec(
                self.path,
                "-P",
                str(self.server_port),
                "start-server",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            rc = await asyncio.wait_for(proc.wait(), self.timeout_s)
        except (OSError, TimeoutError) as exc:
            raise BackendError(f"cannot start the adb server on port {self.server_port}: {exc}") from exc
        if rc != 0:
            raise BackendError(f"adb start-server on port {self.server_port} failed (exit {rc})")
        self._servers.add(key)

    async def connect(self, serial: str) -> tuple[bool, str]:
        """``adb connect``; (connected, adb's answer)."""
        rc, out, err = await self.run("connect", serial, timeout_s=10)
        text = (out + err).decode(errors="replace").strip()
        return rc == 0 and "connected to" in text and "failed" not in text and "unable" not in text, text

    async def disconnect(self, serial: str) -> None:
        with contextlib.suppress(BackendError):
            await self.run("disconnect", serial, timeout_s=10)

    async def shell(self, serial: str, command: str, timeout_s: float | None = None) -> str:
        """``adb shell <command>`` (one string, parsed by the device's shell); stdout and stderr as text."""
        rc, out, err = await self.run("shell", command, serial=serial, timeout_s=timeout_s)
        self._check(rc, err, serial, command)
        return (out + err).decode(errors="replace")

    async def exec_out(self, serial: str, command: str, timeout_s: float | None = None) -> bytes:
        """``adb exec-out <command>``: the command's raw stdout."""
        rc, out, err = await self.run("exec-out", command, serial=serial, timeout_s=timeout_s)
        self._check(rc, err, serial, command)
        return out

    @staticmethod
    def _check(rc: int, err: bytes, serial: str, command: str) -> None:
        # adb's own failures (device offline, not found, connection lost) print "error: ..." and exit non-zero;
        # a command's exit status (shell protocol v2 only) is left for the caller to read from the output.
        text = err.decode(errors="replace").strip()
        if rc != 0 and (text.startswith(("error:", "adb: error")) or "device offline" in text):
            raise BackendError(f"adb on {serial} failed running {command[:60]!r}: {text[:300]}")


class AndroidBackend(Backend):
    """One ReDroid container (or a stand-in speaking adb) and this instance's mocked apps."""

    platform = "android"

    def __init__(self, cfg: AndroidBackendConfig, apps: AppsHandle, name: str = "") -> None:
        self.cfg = cfg
        self.apps = apps
        self.name = name or f"{cfg.name_prefix}-{secrets.token_hex(4)}"
        self.adb = AdbClient(cfg.adb_path, cfg.adb_server_port, cfg.adb_timeout_s)
        self.serial = ""
        self.container: Any = None
        self.container_id = ""
        self.width, self.height = cfg.width or 720, cfg.height or 1280
        self.episodes_on_container = 0  # resets since the container was created
        self.recreations = 0
        self._docker: Any = None
        self._elements: dict[str, Element] = {}
        self._dirty = False  # the container has run an episode since it was created
        self._started = False
        self._url = ""
        self._app = ""
        self._lock = asyncio.Lock()

    # -- containers -----------------------------------------------------------------------------------------
    def _client(self) -> Any:
        try:
            import docker
        except ImportError as exc:
            raise BackendError(
                "the android backend needs the docker SDK: pip install 'maigym_ray[android]'"
            ) from exc
        try:
            client = (
                docker.DockerClient(base_url=self.cfg.docker_url, timeout=120)
                if self.cfg.docker_url
                else docker.from_env(timeout=120)
            )
            client.ping()
        except Exception as exc:  # the SDK raises DockerException, requests' and socket errors
            where = self.cfg.docker_url or "DOCKER_HOST / the default socket"
            raise BackendError(f"cannot reach the docker daemon at {where}: {exc}") from exc
        return client

    async def _docker_call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except BackendError:
            raise
        except Exception as exc:  # docker.errors.DockerException, requests errors, OSError
            raise BackendError(f"docker {what} for container {self.name} failed: {exc}") from exc

    def _volume_name(self) -> str:
        return f"{self.name}-data"

    def _fresh_data(self) -> str:
        """A fresh /data overlay for the next container; returns the mount source (a folder or volume)."""
        cfg = self.cfg
        if cfg.data_root:
            path = Path(cfg.data_root) / self.name
            shutil.rmtree(path, ignore_errors=True)
            if cfg.data_template:
                shutil.copytree(cfg.data_template, path, symlinks=True)
            else:
                path.mkdir(parents=True)
            return str(path)
        if cfg.data_template:
            raise BackendError("android.data_template needs android.data_root (a host folder of overlays)")
        self._remove_volume()
        self._docker.volumes.create(self._volume_name(), labels={"maigym.instance": self.name})
        return self._volume_name()

    def _remove_volume(self) -> None:
        import docker

        try:
            self._docker.volumes.get(self._volume_name()).remove(force=True)
        except docker.errors.NotFound:
            pass

    def _run_container(self, data: str, port: int) -> Any:
        cfg = self.cfg
        env = dict(cfg.env)
        kwargs: dict[str, Any] = {}
        if cfg.network == "host":
            env["MAIGYM_ADB_PORT"] = str(port)
        else:
            kwargs["ports"] = {"5555/tcp": (cfg.adb_host, port or None)}
        return self._docker.containers.run(
            cfg.image,
            command=boot_args(cfg),
            name=self.name,
            detach=True,
            privileged=cfg.privileged,
            network_mode=cfg.network,
            environment=env,
            volumes=[f"{data}:/data", *cfg.volumes],
            devices=list(cfg.devices) or None,
            mem_limit=cfg.memory or None,
            labels={"maigym.backend": "android", "maigym.instance": self.name},
            **kwargs,
        )

    def _host_port(self, container: Any) -> int:
        container.reload()
        bindings = (container.attrs.get("NetworkSettings", {}).get("Ports") or {}).get("5555/tcp") or []
        if not bindings:
            raise BackendError(f"container {self.name} publishes no port for adbd (5555/tcp)")
        return int(bindings[0]["HostPort"])

    async def _create(self) -> None:
        cfg = self.cfg
        data = await self._docker_call("/data overlay", self._fresh_data)
        port = cfg.adb_port or (_free_port(cfg.adb_host) if cfg.network == "host" else 0)
        self.container = await self._docker_call("run", self._run_container, data, port)
        self.container_id = self.container.id
        if cfg.network != "host":
            port = await self._docker_call("inspect", self._host_port, self.container)
        self.serial = f"{cfg.adb_host}:{port}"
        await self._wait_boot()
        size = await self.adb.shell(self.serial, "wm size")
        sizes = re.findall(r"(\d+)x(\d+)", size)
        if sizes:  # the override size (listed last) wins over the physical one
            self.width, self.height = (int(v) for v in sizes[-1])
        self.episodes_on_container, self._dirty, self._elements = 0, False, {}

    async def _container_status(self) -> tuple[str, str]:
        def inspect() -> tuple[str, str]:
            self.container.reload()
            status = self.container.status
            logs = ""
            if status in ("exited", "dead"):
                logs = self.container.logs(tail=20).decode(errors="replace").strip()
            return status, logs

        return await self._docker_call("inspect", inspect)

    async def _wait_boot(self) -> None:
        """Waits until ``getprop sys.boot_completed`` is 1; BackendError naming the container otherwise."""
        cfg = self.cfg
        deadline = time.monotonic() + cfg.boot_timeout_s
        last = "no answer yet"
        while True:
            status, logs = await self._container_status()
            if status in ("exited", "dead"):
                raise BackendError(
                    f"container {self.name} ({cfg.image}) {status} while booting; last logs: {logs}"
                )
            connected, answer = await self.adb.connect(self.serial)
            if connected:
                rc, out, err = await self.adb.run(
                    "shell", "getprop sys.boot_completed", serial=self.serial, timeout_s=10
                )
                text = (out + err).decode(errors="replace").strip()
                if rc == 0 and text == "1":
                    return
                last = f"sys.boot_completed={text!r}"
            else:
                last = answer
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"container {self.name} ({cfg.image}) did not finish booting within {cfg.boot_timeout_s:g} s: "
                    f"`getprop sys.boot_completed` never answered 1 on {self.serial} (last: {last})"
                )
            await asyncio.sleep(cfg.boot_poll_s)

    async def _remove(self) -> None:
        """Removes the container and its /data overlay (never raises)."""
        if self.serial:
            await self.adb.disconnect(self.serial)
        container, self.container = self.container, None
        if container is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.remove, force=True)
        elif self._docker is not None:  # a failed run may still have left a container of this name
            with contextlib.suppress(Exception):
                await asyncio.to_thread(lambda: self._docker.containers.get(self.name).remove(force=True))
        if self.cfg.data_root:
            await asyncio.to_thread(shutil.rmtree, Path(self.cfg.data_root) / self.name, True)
        elif self._docker is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._remove_volume)

    async def recreate(self) -> None:
        """Replaces the container with a new one on a fresh /data overlay and waits for it to boot."""
        await self._remove()
        try:
            await self._create()
        except BaseException:
            await self._remove()
            raise
        self.recreations += 1

    # -- Backend --------------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        try:
            await self.apps.start()
        except OSError as exc:
            raise BackendError(f"app host failed to start: {exc}") from exc
        self._docker = await asyncio.to_thread(self._client)
        await self.adb.ensure_server()
        try:
            await self._create()
            await self._check_packages()
        except BaseException:
            await self._remove()
            raise
        self._started = True

    async def _check_packages(self) -> None:
        """BackendError up front when the image lacks a package the config names."""
        cfg = self.cfg
        wanted = set(cfg.clear_packages) | {c.split("/")[0] for c in cfg.app_components.values()}
        if self.apps.names and cfg.browser_component:
            wanted.add(cfg.browser_component.split("/")[0])
        if not wanted:
            return
        installed = set(re.findall(r"^package:(\S+)", await self._shell("pm list packages"), re.M))
        missing = sorted(wanted - installed)
        if missing:
            raise BackendError(
                f"container {self.name} ({cfg.image}) lacks package(s) {missing}: install them in the image (or "
                "the /data template), or change android.clear_packages / app_components / browser_component"
            )

    def _require(self) -> None:
        if not self._started or self.container is None:
            raise BackendError(f"android instance {self.name} is not started")

    async def reset(self, task: TaskSpec) -> None:
        self._require()
        async with self._lock:
            recycle = self.cfg.recycle_after and self.episodes_on_container >= self.cfg.recycle_after
            if recycle or (self.cfg.reset == "recreate" and self._dirty):
                await self.recreate()
            elif self._dirty:
                await self._pm_clear()
            try:
                await self.apps.reset(task.initial_state)
            except AppError as exc:
                raise TaskError(f"task {task.id}: bad initial_state: {exc}") from exc
            self.episodes_on_container += 1
            self._dirty = True
            self._url, self._app, self._elements = "", "", {}
            if task.start_app:
                error = await self._open_app(task.start_app)
                if error:
                    raise TaskError(f"task {task.id}: start_app: {error}")
            else:
                await self._shell(f"input keyevent {KEY_HOME}")

    async def _pm_clear(self) -> None:
        if not self.cfg.clear_packages:
            await self._shell(f"input keyevent {KEY_HOME}")
            return
        cmds = [f"pm clear {shlex.quote(p)}" for p in self.cfg.clear_packages]
        out = await self._shell("; ".join([*cmds, f"input keyevent {KEY_HOME}"]))
        answers = re.findall(r"\b(Success|Failed)\b", out)
        if answers.count("Success") != len(cmds):
            raise BackendError(
                f"pm clear of {self.cfg.clear_packages} on {self.name} failed: {out.strip()[:300]}"
            )

    async def _shell(self, command: str) -> str:
        return await self.adb.shell(self.serial, command)

    def _app_url(self, name: str) -> str:
        parts = urlsplit(self.apps.url)
        host = self.cfg.apps_address or parts.hostname or "127.0.0.1"
        netloc = f"[{host}]" if ":" in host else host
        netloc += f":{parts.port}" if parts.port else ""
        return urlunsplit((parts.scheme or "http", netloc, parts.path.rstrip("/") + f"/{name}/", "", ""))

    async def _open_app(self, name: str) -> str:
        component = self.cfg.app_components.get(name, "")
        url = ""
        if component:
            command = f"am start -n {shlex.quote(component)}"
        elif name in self.apps.names:
            url = self._app_url(name)
            command = f"am start -a android.intent.action.VIEW -d {shlex.quote(url)}"
            if self.cfg.browser_component:
                command += f" -n {shlex.quote(self.cfg.browser_component)}"
        else:
            known = sorted({*self.cfg.app_components, *self.apps.names})
            return f"open_app: unknown app {name!r}; available: {', '.join(known)}"
        out = await self._shell(command)
        if "Error" in out or "Exception" in out:
            raise BackendError(f"am start of {name!r} on {self.name} failed: {out.strip()[:300]}")
        self._app, self._url = name, url
        return ""

    async def _dump(self) -> str:
        path = shlex.quote(self.cfg.dump_path)
        out = ""
        for _ in range(3):  # uiautomator fails now and then while the screen animates ("could not get idle")
            out = await self._shell(f"rm -f {path}; uiautomator dump {path} >/dev/null && cat {path}")
            if "</hierarchy>" in out:
                return out
            await asyncio.sleep(0.3)
        raise BackendError(f"uiautomator dump on {self.name} gave no hierarchy: {out.strip()[:300]}")

    async def observe(self) -> Observation:
        self._require()
        t0 = time.perf_counter()
        shot: Any = (
            self.adb.exec_out(self.serial, "screencap -p") if self.cfg.screenshot else asyncio.sleep(0)
        )
        dump, png = await asyncio.gather(self._dump(), shot)
        png = png or b""
        try:
            a11y, elements, package = parse_hierarchy(dump)
            width, height = png_size(png) if png else (self.width, self.height)
        except ValueError as exc:
            raise BackendError(f"bad observation from {self.name}: {exc}") from exc
        self.width, self.height = width, height
        self._elements = {e.id: e for e in elements}
        components = {n: c.split("/")[0] for n, c in self.cfg.app_components.items()}
        browser_pkg = self.cfg.browser_component.split("/")[0]
        app = next((n for n, p in components.items() if p == package), "")
        url = ""
        if not app and self._url and (package == browser_pkg or not browser_pkg):
            app, url = self._app, self._url
        return Observation(
            platform=self.platform,
            screenshot=png,
            width=width,
            height=height,
            a11y=f'app "{package}"\n' + a11y,
            url=url,
            app=app,
            elements=tuple(elements),
            timings={"observe_s": time.perf_counter() - t0},
        )

    def _point(self, args: dict[str, Any], prefix: str = "") -> tuple[int, int] | str:
        if f"{prefix}id" in args:
            el = self._elements.get(str(args[f"{prefix}id"]))
            if el is None:
                return f"no element with id {args[prefix + 'id']!r} on this screen"
            return el.x, el.y
        x = round(args[f"{prefix}x"] * (self.width - 1) / 1000)
        y = round(args[f"{prefix}y"] * (self.height - 1) / 1000)
        return x, y

    def _element_at(self, args: dict[str, Any], pt: tuple[int, int]) -> Element | None:
        """The text box a type action targets: its id, or the smallest text box around the point."""
        if "id" in args:
            el = self._elements.get(str(args["id"]))
            return el if el is not None and el.role == "textbox" else None
        boxes = [
            e
            for e in self._elements.values()
            if e.role == "textbox" and abs(pt[0] - e.x) * 2 <= e.w and abs(pt[1] - e.y) * 2 <= e.h
        ]
        return min(boxes, key=lambda e: e.w * e.h, default=None)

    def _input(self, action: Action) -> list[str] | str:
        """The shell commands of one action, or an agent-mistake message."""
        name, a = action.name, action.args
        if name in ("click", "long_press"):
            pt = self._point(a)
            if isinstance(pt, str):
                return pt
            if name == "click":
                return [f"input tap {pt[0]} {pt[1]}"]
            ms = a.get("duration_ms") or self.cfg.long_press_ms
            return [f"input swipe {pt[0]} {pt[1]} {pt[0]} {pt[1]} {ms}"]
        if name == "type":
            cmds = []
            if "id" in a or "x" in a:  # like the web backend: a targeted type replaces the field's text
                pt = self._point(a)
                if isinstance(pt, str):
                    return pt
                cmds.append(f"input tap {pt[0]} {pt[1]}")
                field = self._element_at(a, pt)
                if field is not None and field.value:
                    cmds.append(
                        f"input keyevent {KEY_MOVE_END} " + " ".join([str(KEY_DEL)] * len(field.value))
                    )
            text = a["text"]
            if not text.isascii() or any(c < " " and c != "\n" for c in text):
                return "type: adb can only type printable ASCII text and line breaks on android"
            for i, part in enumerate(text.split("\n")):
                if i:
                    cmds.append(f"input keyevent {KEY_ENTER}")
                if part:
                    cmds.append("input text " + shlex.quote(part.replace(" ", "%s")))
            if a.get("enter"):
                cmds.append(f"input keyevent {KEY_ENTER}")
            return cmds
        if name == "scroll":
            pt = self._point(a) if ("id" in a or "x" in a) else (self.width // 2, self.height // 2)
            if isinstance(pt, str):
                return pt
            d = a["direction"]
            vertical = d in ("up", "down")
            span = self.height if vertical else self.width
            dist = min(a.get("amount") or int(span * 0.5), span - 2)
            # the finger moves against the scroll direction: scrolling down drags the content up
            sign = 1 if d in ("down", "right") else -1
            c = pt[1] if vertical else pt[0]
            start = min(max(c + sign * dist // 2, 1), span - 2)
            end = min(max(start - sign * dist, 1), span - 2)
            if vertical:
                return [f"input swipe {pt[0]} {start} {pt[0]} {end} 400"]
            return [f"input swipe {start} {pt[1]} {end} {pt[1]} 400"]
        if name == "swipe":
            fx, fy = self._point({"x": a["from_x"], "y": a["from_y"]})  # type: ignore[misc]
            tx, ty = self._point({"x": a["to_x"], "y": a["to_y"]})  # type: ignore[misc]
            return [f"input swipe {fx} {fy} {tx} {ty} 300"]
        if name == "drag":
            src, dst = self._point(a, "from_"), self._point(a, "to_")
            for pt in (src, dst):
                if isinstance(pt, str):
                    return pt
            ms = self.cfg.long_press_ms + 700
            return [f"input draganddrop {src[0]} {src[1]} {dst[0]} {dst[1]} {ms}"]  # type: ignore[index]
        if name == "key":
            return [f"input keyevent {KEYCODES[a['key']]}"]
        if name == "navigate_back":
            return [f"input keyevent {KEY_BACK}"]
        if name == "navigate_home":
            return [f"input keyevent {KEY_HOME}"]
        return f"action {name} is not supported on android"

    async def act(self, action: Action) -> str:
        self._require()
        name = action.name
        if name in ("answer", "terminate"):
            return ""
        if name == "wait":
            await asyncio.sleep(min(float(action.args.get("seconds", 1.0)), self.cfg.wait_cap_s))
            return ""
        if name == "open_app":
            error = await self._open_app(action.args["name"])
        else:
            if name == "key" and action.args["key"] not in KEYCODES:
                return f"key: {action.args['key']!r} has no android keycode"
            cmds = self._input(action)
            if isinstance(cmds, str):
                return cmds
            out = await self._shell("; ".join(cmds))
            if "Exception" in out or "Error:" in out:
                raise BackendError(f"input on {self.name} failed: {out.strip()[:300]}")
            error = ""
        if self.cfg.settle_s:
            await asyncio.sleep(self.cfg.settle_s)
        return error

    async def state(self) -> dict[str, Any]:
        return await self.apps.state()

    async def health(self) -> bool:
        if not self._started or self.container is None:
            return False
        try:
            status, _ = await self._container_status()
            if status != "running":
                return False
            rc, out, _ = await self.adb.run(
                "shell", "getprop sys.boot_completed", serial=self.serial, timeout_s=5
            )
            return rc == 0 and out.strip() == b"1"
        except Exception:
            return False

    async def close(self) -> None:
        self._started = False
        with contextlib.suppress(Exception):
            await self._remove()
        with contextlib.suppress(Exception):
            await self.apps.close()
        if self._docker is not None:
            with contextlib.suppress(Exception):
                self._docker.close()
            self._docker = None
