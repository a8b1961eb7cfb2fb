"""The android backend: a ReDroid container per instance (docker SDK), driven over adb.

- **Container**: ``docker run --privileged <image> androidboot.redroid_width=W androidboot.redroid_height=H
  androidboot.redroid_dpi=D androidboot.redroid_gpu_mode=M ...`` with /data on a fresh per-instance overlay (a
  host folder under ``data_root``, optionally copied from ``data_template``, or a docker volume), a memory
  limit, and either bridge networking (adbd's 5555 published on ``adb_host``) or host networking (adbd's port
  passed as ``MAIGYM_ADB_PORT``). Boot is done when ``getprop sys.boot_completed`` answers 1; a container that
  does not get there within ``boot_timeout_s`` (or exits) raises :class:`BackendError` naming it.
- **adb**: the real ``adb`` client (:mod:`~maigym_ray.envs.backends.adb`; one adb server per node, on
  loopback) with ``adb connect host:port``; every device command is one ``adb shell`` / ``adb exec-out`` call.
  Screenshots are ``screencap -p``; the accessibility text comes from ``uiautomator dump``
  (:mod:`~maigym_ray.envs.backends.android_screen`): one ``[id] role "name"`` line per useful node, ids being
  resource-id names where there is one and ``eN`` otherwise.
- **Actions** (every action of ``PLATFORM_ACTIONS["android"]``): ``input tap|swipe|text|keyevent|draganddrop``
  (:mod:`~maigym_ray.envs.backends.android_input`); targets are element ids (the centre of the node's bounds, from the last observation) or x/y normalised
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
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from maigym_ray.envs.backend import Backend
from maigym_ray.envs.backends.adb import AdbClient
from maigym_ray.envs.backends.android_input import (
    KEY_BACK,
    KEY_DEL,
    KEY_ENTER,
    KEY_HOME,
    KEY_MOVE_END,
    KEYCODES,
    AndroidInput,
)
from maigym_ray.envs.backends.android_screen import ROLES, parse_hierarchy, png_size
from maigym_ray.envs.backends.web import AppsHandle
from maigym_ray.envs.config import AndroidBackendConfig
from maigym_ray.errors import AppError, BackendError, TaskError
from maigym_ray.types import Action, Element, Observation, TaskSpec

# the names that moved to adb, android_input and android_screen stay importable from here
__all__ = [
    "KEYCODES",
    "KEY_BACK",
    "KEY_DEL",
    "KEY_ENTER",
    "KEY_HOME",
    "KEY_MOVE_END",
    "ROLES",
    "AdbClient",
    "AndroidBackend",
    "boot_args",
    "parse_hierarchy",
    "png_size",
]


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

    def _input(self, action: Action) -> list[str] | str:
        """The shell commands of one action, or an agent-mistake message."""
        return AndroidInput(self._elements, self.width, self.height, self.cfg.long_press_ms).commands(action)

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
