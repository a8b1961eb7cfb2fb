"""XvfbProvider: one desktop = an X display on this node (Xvfb), openbox, and the guest agent on it.

The agent runs the session (Chromium full-screen, and the editor and terminal on demand). Reset keeps the X
server, the window manager and the agent alive and asks the agent to kill the session apps, restore the home
directory from the template and wipe (or relaunch) Chromium: about 0.1 s, where bringing a display up costs
about 1.5 s. Every process runs in its own process group and gets SIGKILL when its parent dies (the env
actor, or for the session apps the agent), so an actor killed without ``close`` leaves nothing running.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from maigym_ray.envs.config import DesktopBackendConfig
from maigym_ray.envs.desktop.client import AgentClient
from maigym_ray.envs.desktop.guest_browser import die_with_parent
from maigym_ray.envs.desktop.provider import AgentEndpoint, DesktopProvider
from maigym_ray.errors import BackendError

_PREFIX = "maigym-desktop-"


def _remove_stale_dirs() -> None:
    """Removes desktop folders whose owning process is gone (an env actor killed before ``close``); the
    processes themselves died with it (PR_SET_PDEATHSIG)."""
    for d in Path(tempfile.gettempdir()).glob(_PREFIX + "*"):
        try:
            os.kill(int((d / "owner").read_text()), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (OSError, ValueError):  # still being created, or not ours to judge
            pass


class XvfbProvider(DesktopProvider):
    """An X display per instance, with openbox and the guest agent (bound to 127.0.0.1)."""

    def __init__(self, cfg: DesktopBackendConfig) -> None:
        self.cfg = cfg
        self.tmp: Path | None = None
        self.display = ""
        self.xvfb: subprocess.Popen[bytes] | None = None
        self.wm: subprocess.Popen[bytes] | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        self.endpoint: AgentEndpoint | None = None
        self._client: AgentClient | None = None

    @property
    def home(self) -> Path:
        """The desktop's home directory on this node."""
        if self.tmp is None:
            raise BackendError("the desktop is not started")
        return self.tmp / "home"

    def pids(self) -> dict[str, int]:
        """Process ids of the X server, the window manager and the agent (0 when not running)."""
        return {
            name: p.pid if p is not None and p.poll() is None else 0
            for name, p in (("xvfb", self.xvfb), ("wm", self.wm), ("agent", self.agent))
        }

    def _spawn(self, argv: list[str], env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
        assert self.tmp is not None
        with open(self.tmp / log, "wb") as out:
            return subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    async def start(self) -> AgentEndpoint:
        if self.endpoint is not None:
            return self.endpoint
        try:
            return await asyncio.wait_for(self._start(), self.cfg.start_timeout_s)
        except BackendError:
            await self.close()
            raise
        except (OSError, TimeoutError, RuntimeError) as exc:
            log = self._log_tail()
            await self.close()
            raise BackendError(f"the Xvfb desktop did not come up: {type(exc).__name__}: {exc}{log}") from exc

    async def _start(self) -> AgentEndpoint:
        for tool in ("Xvfb", "openbox", "xdotool"):
            if shutil.which(tool) is None:
                raise BackendError(
                    f"{tool} is not installed (scripts/setup.sh installs the desktop packages)"
                )
        _remove_stale_dirs()
        self.tmp = Path(tempfile.mkdtemp(prefix=_PREFIX))
        (self.tmp / "owner").write_text(str(os.getpid()))
        # -displayfd: the server picks a free display number itself and writes it to the pipe (no races
        # between instances starting at once on one node).
        rfd, wfd = os.pipe()
        try:
            self.xvfb = subprocess.Popen(
                [
                    "Xvfb",
                    "-displayfd",
                    str(wfd),
                    "-screen",
                    "0",
                    f"{self.cfg.width}x{self.cfg.height}x24",
                    "-nolisten",
                    "tcp",
                    "-noreset",
                ],
                pass_fds=(wfd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=open(self.tmp / "xvfb.log", "wb"),
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
            os.close(wfd)
            wfd = -1
            self.display = ":" + (await asyncio.to_thread(_read_line, rfd)).strip()
        finally:
            os.close(rfd)
            if wfd >= 0:
                os.close(wfd)
        if self.display == ":":
            raise RuntimeError("Xvfb exited before announcing its display")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "DISPLAY": self.display,
            "HOME": str(self.tmp),
        }
        self.wm = self._spawn(["openbox", "--sm-disable"], env, "openbox.log")
        token = secrets.token_urlsafe(32)
        token_file = self.tmp / "token"
        token_file.touch(mode=0o600)
        token_file.write_text(token)
        port_file = self.tmp / "port"
        argv = [
            sys.executable,
            "-m",
            "maigym_ray.envs.desktop.agent",
            "--display",
            self.display,
            "--token-file",
            str(token_file),
            "--consume-token",
            "--home",
            str(self.tmp / "home"),
            "--session-dir",
            str(self.tmp / "session"),
            "--port-file",
            str(port_file),
            "--bind",
            "127.0.0.1",
            "--width",
            str(self.cfg.width),
            "--height",
            str(self.cfg.height),
            "--settle-timeout",
            str(self.cfg.settle_timeout_s),
        ]
        if self.cfg.home_template:
            argv += ["--home-template", self.cfg.home_template]
        if self.cfg.chromium:
            argv += ["--chromium", self.cfg.chromium]
        if self.cfg.terminal:
            argv += ["--terminal-user", self.cfg.terminal_user]
            self.tmp.chmod(0o711)  # the terminal's user may pass through to home/, not list or read the rest
        await self._wait_wm()
        agent_env = {**os.environ, "DISPLAY": self.display, "PYTHONUNBUFFERED": "1"}
        self.agent = self._spawn(argv, agent_env, "agent.log")
        while not port_file.exists():
            for name, proc in (("Xvfb", self.xvfb), ("openbox", self.wm), ("agent", self.agent)):
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} during start")
            await asyncio.sleep(0.05)
        self.endpoint = AgentEndpoint(f"http://127.0.0.1:{port_file.read_text().strip()}", token)
        self._client = AgentClient(self.endpoint, self.cfg.agent_timeout_s)
        await self._client.health()
        return self.endpoint

    async def _wait_wm(self) -> None:
        """Waits until openbox manages the display (windowactivate fails without a window manager)."""
        from maigym_ray.envs.desktop.xwindows import XWindows

        xw = XWindows(self.display)
        try:
            deadline = time.monotonic() + 10
            while not xw.wm_ready():
                if self.wm is not None and self.wm.poll() is not None:
                    raise RuntimeError(f"openbox exited with {self.wm.returncode}")
                if time.monotonic() > deadline:
                    raise RuntimeError("openbox did not start within 10s")
                await asyncio.sleep(0.02)
        finally:
            xw.close()

    def _log_tail(self) -> str:
        if self.tmp is None or not (self.tmp / "agent.log").exists():
            return ""
        tail = (self.tmp / "agent.log").read_text(errors="replace")[-1500:]
        return f"\nagent log:\n{tail}" if tail.strip() else ""

    async def reset(self) -> AgentEndpoint:
        if self.endpoint is None or self._client is None:
            raise BackendError("reset before start")
        if not await self.health():
            raise BackendError(f"the desktop on {self.display} is down: {self.pids()}")
        await self._client.reset_session(restore_home=True, keep_browser=self.cfg.keep_browser)
        return self.endpoint

    async def health(self) -> bool:
        return all(p is not None and p.poll() is None for p in (self.xvfb, self.wm, self.agent))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        # the agent first (SIGTERM lets it stop its session apps), then the window manager and the X server
        for proc in (self.agent, self.wm, self.xvfb):
            if proc is None or proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                await asyncio.wait_for(asyncio.to_thread(proc.wait), 3)
            except (ProcessLookupError, TimeoutError):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                    await asyncio.to_thread(proc.wait)
                except ProcessLookupError:
                    pass
        self.agent = self.wm = self.xvfb = None
        self.endpoint = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _read_line(fd: int) -> str:
    out = b""
    while not out.endswith(b"\n"):
        chunk = os.read(fd, 16)
        if not chunk:
            break
        out += chunk
    return out.decode()
