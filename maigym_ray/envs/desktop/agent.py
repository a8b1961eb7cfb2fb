"""The guest agent: a small HTTP service that runs INSIDE one desktop and does everything the host asks of it.

Started as its own process (on the X display it serves)::

    python -m maigym_ray.envs.desktop.agent --display :N --port 0 --token-file F --home H \
        [--home-template T] [--session-dir S] [--port-file P] [--bind 127.0.0.1]

It writes its port to ``--port-file`` (and prints ``READY <port>``) once the session Chromium is up. Every
request needs ``Authorization: Bearer <token>`` (401 otherwise); the endpoints are listed in
:mod:`~maigym_ray.envs.desktop.agent_routes`; the home directory, where commands run and files are read
and written, is kept by :mod:`~maigym_ray.envs.desktop.home_dir`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import pwd
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aiohttp import web

from maigym_ray.envs.desktop.agent_routes import make_app
from maigym_ray.envs.desktop.cdp import CDPError
from maigym_ray.envs.desktop.guest_browser import GuestBrowser, die_with_parent, find_desktop_chromium
from maigym_ray.envs.desktop.home_dir import HomeDir
from maigym_ray.envs.desktop.xwindows import Window, XWindows

#: Grammar key names -> X keysyms (xdotool spelling).
XKEYS: dict[str, str] = {
    "Enter": "Return",
    "Backspace": "BackSpace",
    "Space": "space",
    "ArrowUp": "Up",
    "ArrowDown": "Down",
    "ArrowLeft": "Left",
    "ArrowRight": "Right",
    "PageUp": "Prior",
    "PageDown": "Next",
    "Control": "ctrl",
    "Shift": "shift",
    "Alt": "alt",
    "Meta": "super",
}
#: Pixels one wheel click scrolls in Chromium on X11 (used to turn a pixel amount into clicks).
WHEEL_PX = 53
SESSION_APPS = ("browser", "editor", "terminal")


def _page_offset(win: dict[str, Any], inner_w: int, inner_h: int) -> tuple[int, int]:
    """Screen position of the page viewport's top-left corner: browser UI (if any) sits above the page."""
    return win["x"] + max(0, win["w"] - inner_w) // 2, win["y"] + max(0, win["h"] - inner_h)


class Agent:
    """The desktop's agent: X input, screenshots, windows, the session apps, exec and files."""

    def __init__(
        self,
        display: str,
        token: str,
        home: Path,
        home_template: Path | None,
        session_dir: Path,
        chromium: str = "",
        width: int = 1280,
        height: int = 800,
        settle_timeout_s: float = 10.0,
        terminal_user: str | None = None,
    ) -> None:
        self.display, self.token = display, token
        #: the user the terminal runs as; None: no terminal on this desktop
        self.terminal_user = terminal_user
        self.home = home.resolve()
        self.session_dir = session_dir
        self.width, self.height = width, height
        self.settle_timeout_s = settle_timeout_s
        xdg = session_dir / "xdg"
        for d in ("config", "cache", "data", "run"):
            (xdg / d).mkdir(parents=True, exist_ok=True)
        (xdg / "run").chmod(0o700)
        # Session apps see the desktop's home; their config and caches live outside it, so that the home
        # directory holds only what the task and the agent put there (it is what verifiers read).
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "DISPLAY": display,
            "HOME": str(self.home),
            "USER": os.environ.get("USER", "agent"),
            "LANG": "C.UTF-8",
            "SHELL": "/bin/bash",
            "XDG_CONFIG_HOME": str(xdg / "config"),
            "XDG_CACHE_HOME": str(xdg / "cache"),
            "XDG_DATA_HOME": str(xdg / "data"),
            "XDG_RUNTIME_DIR": str(xdg / "run"),
            "NO_AT_BRIDGE": "1",
            # GTK programs keep settings in memory: no dconf, which would try to spawn a D-Bus session
            "GSETTINGS_BACKEND": "memory",
            "GTK_A11Y": "none",
        }
        #: where commands run and files are read or written; restored from ``home_template`` on reset
        self.home_dir = HomeDir(self.home, home_template, self.env, terminal_user)
        self.x = XWindows(display)
        self.browser = GuestBrowser(
            find_desktop_chromium(chromium), session_dir / "chromium-profile", self.env, width, height
        )
        self.apps: dict[str, subprocess.Popen[bytes]] = {}
        #: whether the session has a browser (reset relaunches it); false for agents started --no-browser
        self.with_browser = True
        self._shots = ThreadPoolExecutor(1, thread_name_prefix="screenshot")
        self._mss: Any = None
        self._lock = asyncio.Lock()  # one input/session operation at a time: X input must not interleave

    # -- helpers --------------------------------------------------------------------------------------------
    async def xdotool(self, *args: str | int | float) -> None:
        """Runs one xdotool command line on the display; raises RuntimeError when it fails."""
        proc = await asyncio.create_subprocess_exec(
            "xdotool",
            *map(str, args),
            env=self.env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"xdotool {args[0]} failed: {err.decode(errors='replace').strip()[:300]}")

    def _grab(self) -> bytes:
        if self._mss is None:  # created in the screenshot thread: an X handle must stay on one thread
            try:
                import mss

                self._mss = getattr(mss, "MSS", mss.mss)(display=self.display)
            except ImportError:  # no mss: Xlib's XGetImage on a second connection does the same
                self._mss = XWindows(self.display)
        if isinstance(self._mss, XWindows):
            return self._mss.screenshot_png()
        import mss.tools

        shot = self._mss.grab(self._mss.monitors[0])
        return mss.tools.to_png(shot.rgb, shot.size, level=1)  # level 1: 3x faster than 6, ~20% larger

    async def screenshot(self) -> bytes:
        """PNG of the whole screen (mss, or Xlib's XGetImage when mss is missing)."""
        return await asyncio.get_running_loop().run_in_executor(self._shots, self._grab)

    def _app_of(self, win: Window) -> str:
        if win.pid and win.pid == self.browser.pid:
            return "browser"
        for name, proc in self.apps.items():
            if proc.poll() is None and win.pid == proc.pid:
                return name
        # the same programs started some other way (from the terminal, say) are still the editor and terminal
        return {"mousepad": "editor", "xterm": "terminal"}.get(win.wm_class.lower(), win.wm_class.lower())

    def windows(self) -> list[dict[str, Any]]:
        """The managed windows as dicts (id ``w<xid>``, app, title, geometry, focus)."""
        out = []
        for w in self.x.list():
            if w.w <= 1 or w.h <= 1:
                continue
            out.append(
                {
                    "id": f"w{w.xid}",
                    "xid": w.xid,
                    "app": self._app_of(w),
                    "title": w.title,
                    "x": w.x,
                    "y": w.y,
                    "w": w.w,
                    "h": w.h,
                    "focused": w.focused,
                }
            )
        return out

    def _window(self, app: str) -> dict[str, Any] | None:
        return next((w for w in self.windows() if w["app"] == app), None)

    async def activate(self, win: dict[str, Any]) -> None:
        """Focuses and raises a window, waiting (briefly) until the window manager has done it."""
        if self.x.active() == win["xid"]:
            return
        await self.xdotool("windowactivate", win["xid"])
        deadline = time.monotonic() + 1.0
        while self.x.active() != win["xid"] and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def wait_window(self, app: str, timeout_s: float = 10.0) -> dict[str, Any]:
        """Waits for the first window of session app ``app`` to be mapped."""
        deadline = time.monotonic() + timeout_s
        while True:
            win = self._window(app)
            if win is not None:
                return win
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {app} window appeared within {timeout_s}s")
            await asyncio.sleep(0.02)

    async def browser_tree(self) -> dict[str, Any] | None:
        """The Chromium page's snapshot with element centres in screen pixels (None without a browser)."""
        win = self._window("browser")
        if win is None or not self.browser.alive():
            return None
        try:
            snap = await self.browser.snapshot()
        except CDPError:
            return None
        ox, oy = _page_offset(win, snap["iw"], snap["ih"])
        for e in snap["elements"]:
            e["x"] += ox
            e["y"] += oy
        return {
            "title": snap["title"],
            "url": snap["url"],
            "a11y": snap["a11y"],
            "elements": snap["elements"],
            "window": win["id"],
        }

    async def observe(self, screenshot: bool = True) -> dict[str, Any]:
        """Screenshot (base64 PNG), windows and the browser page's elements, taken concurrently."""
        shot = asyncio.ensure_future(self.screenshot()) if screenshot else None
        tree = await self.browser_tree()
        png = await shot if shot is not None else b""
        return {
            "png": base64.b64encode(png).decode(),
            "windows": self.windows(),
            "browser": tree,
            "width": self.width,
            "height": self.height,
        }

    # -- input ----------------------------------------------------------------------------------------------
    async def point(self, args: dict[str, Any], prefix: str = "") -> tuple[float, float] | str:
        """Screen coordinates of a target: ``{prefix}id`` (window or page element) or ``{prefix}x/y``."""
        eid = args.get(f"{prefix}id")
        if eid is None:
            return float(args[f"{prefix}x"]), float(args[f"{prefix}y"])
        windows = self.windows()
        win = next((w for w in windows if w["id"] == eid), None)
        if win is not None:
            await self.activate(win)
            return win["x"] + win["w"] / 2, win["y"] + win["h"] / 2
        bwin = next((w for w in windows if w["app"] == "browser"), None)
        if bwin is not None and self.browser.alive():
            await self.activate(bwin)  # page elements are reachable even when another window covers them
            try:
                found = await self.browser.find(str(eid))
            except CDPError:
                found = None
            if found is not None:
                ox, oy = _page_offset(bwin, found[2], found[3])
                return found[0] + ox, found[1] + oy
        return f"no visible element with id {eid!r} on this screen"

    def _on_screen(self, x: float, y: float) -> bool:
        return 0 <= x < self.width and 0 <= y < self.height

    async def act(self, a: dict[str, Any]) -> str:
        """Performs one input operation; returns "" or the agent's mistake."""
        async with self._lock:
            return await self._act(a)

    async def _browser_probe(self) -> list[Any] | None:
        bwin = self._window("browser")
        if bwin is None or not bwin["focused"] or not self.browser.alive():
            return None  # input that goes to another window needs no page settling
        return await self.browser.probe()

    async def _act(self, a: dict[str, Any]) -> str:
        op = a.get("op")
        if op in ("click", "double_click", "move"):
            win = next((w for w in self.windows() if w["id"] == a.get("id")), None)
            if win is not None:  # clicking a window's id focuses and raises it (a click inside might act)
                await self.activate(win)
                return ""
            pt = await self.point(a)
            if isinstance(pt, str):
                return pt
            if not self._on_screen(*pt):
                return f"{op}: point {pt} is outside the screen"
            before = await self._browser_probe()
            x, y = round(pt[0]), round(pt[1])
            if op == "move":
                await self.xdotool("mousemove", x, y)
            else:
                # xdotool sleeps --delay (default 100 ms) after every click, the last one too
                repeat = ["--repeat", 2, "--delay", 40] if op == "double_click" else ["--delay", 0]
                await self.xdotool("mousemove", x, y, "click", *repeat, a.get("button", 1))
            # a press and a release per click; a bare move sends neither (the page does not count moves)
            await self._settle(before, expect={"click": 2, "double_click": 4}.get(op, 0))
        elif op == "type":
            text = str(a.get("text", ""))
            targeted = "id" in a or "x" in a
            if targeted:
                pt = await self.point(a)
                if isinstance(pt, str):
                    return pt
                before = await self._browser_probe()
                await self.xdotool("mousemove", round(pt[0]), round(pt[1]), "click", "--delay", 0, 1)
                await self._settle(before, expect=2)
            before = await self._browser_probe()
            cmd: list[str | int | float] = []
            if before is not None:  # typing into the page: a text field must have the focus
                if not await self.browser.focused_editable():
                    return "type: no text field is focused; give the field's id or click it first"
                if targeted:  # a target means "set the field to text"
                    cmd += ["key", "--clearmodifiers", "--delay", 1, "ctrl+a", "Delete"]
            text += "\n" if a.get("enter") else ""  # xdotool types a newline as Return
            if text:
                cmd += ["type", "--delay", 2, "--", text]
            if cmd:  # one xdotool process for the whole edit
                await self.xdotool(*cmd)
            await self._settle(before)
        elif op in ("key", "hotkey"):
            keys = [a["key"]] if op == "key" else list(a["keys"])
            combo = "+".join(XKEYS.get(k, k) for k in keys)
            before = await self._browser_probe()
            await self.xdotool("key", "--clearmodifiers", "--delay", 1, combo)
            await self._settle(before)
        elif op == "scroll":
            if "id" in a or "x" in a:
                pt = await self.point(a)
                if isinstance(pt, str):
                    return pt
            else:
                pt = (self.width / 2, self.height / 2)
            d = a["direction"]
            amount = a.get("amount") or int((self.height if d in ("up", "down") else self.width) * 0.6)
            clicks = max(1, round(amount / WHEEL_PX))
            button = {"up": 4, "down": 5, "left": 6, "right": 7}[d]
            before = await self._browser_probe()
            await self.xdotool(
                "mousemove", round(pt[0]), round(pt[1]), "click", "--repeat", clicks, "--delay", 5, button
            )
            await self._settle(before, scrolled=True)
        elif op == "drag":
            src, dst = await self.point(a, "from_"), await self.point(a, "to_")
            if isinstance(src, str) or isinstance(dst, str):
                return src if isinstance(src, str) else str(dst)
            before = await self._browser_probe()
            steps: list[str | int | float] = ["mousemove", round(src[0]), round(src[1]), "mousedown", 1]
            for i in range(1, 9):
                fx, fy = src[0] + (dst[0] - src[0]) * i / 8, src[1] + (dst[1] - src[1]) * i / 8
                steps += ["sleep", 0.01, "mousemove", round(fx), round(fy)]
            await self.xdotool(*steps, "mouseup", 1)
            await self._settle(before)
        else:
            return f"unknown input op {op!r}"
        return ""

    async def _settle(self, before: list[Any] | None, scrolled: bool = False, expect: int = 0) -> None:
        try:
            await self.browser.settle(before, scrolled, self.settle_timeout_s, expect)
        except CDPError as exc:
            raise RuntimeError(f"the browser did not settle: {exc}") from exc

    async def back(self) -> str:
        """Alt+Left in the browser (focusing it first); a mistake when its history has no previous page."""
        async with self._lock:
            if not self.browser.alive():
                return "navigate_back: the browser is not open"
            hist = await self.browser.send("Page.getNavigationHistory")
            if hist["currentIndex"] <= 0:
                return "navigate_back: there is no previous screen"
            await self.activate(await self.wait_window("browser"))
            before = await self.browser.probe()
            await self.xdotool("key", "--clearmodifiers", "--delay", 1, "alt+Left")
            if before is not None:  # history navigation always loads another document
                try:
                    await self.browser.wait_loaded(before[1], self.settle_timeout_s)
                except CDPError as exc:
                    raise RuntimeError(f"navigate_back did not finish: {exc}") from exc
            return ""

    # -- session --------------------------------------------------------------------------------------------
    async def launch(self, app: str, url: str = "", path: str = "") -> str:
        """Starts (or focuses) a session app: the browser (at ``url``), the editor (on ``path``), a terminal."""
        async with self._lock:
            if app == "browser":
                if not self.browser.alive():
                    await self.browser.launch(url or "about:blank")
                elif url:
                    await self.browser.navigate(url, self.settle_timeout_s)
                await self.activate(await self.wait_window("browser"))
                return ""
            if app not in ("editor", "terminal"):
                return f"no app named {app!r}; desktop apps: {', '.join(SESSION_APPS)}"
            if app == "terminal" and self.terminal_user is None:
                return "the terminal is turned off on this desktop"
            proc = self.apps.get(app)
            if proc is None or proc.poll() is not None:
                if app == "editor":
                    argv = ["mousepad"]
                    if path:
                        target = self.home_dir.resolve(path)
                        if target is None:
                            return f"editor: {path!r} is outside the home directory"
                        argv.append(str(target))
                else:
                    argv = [
                        "xterm",
                        "-fa",
                        "Monospace",
                        "-fs",
                        "11",
                        "-geometry",
                        "100x30+40+40",
                        "-e",
                        "bash",
                        "--noprofile",
                        "--norc",
                    ]
                env = {**self.env, "PS1": "$ "}
                if app == "terminal":
                    try:
                        argv = [*self._terminal_prefix(), *argv]
                    except PermissionError as exc:
                        return str(exc)
                    # the session's XDG dirs are the agent's (mode 0700), not the terminal user's
                    env = {k: v for k, v in env.items() if not k.startswith("XDG_")}
                    env["USER"] = env["LOGNAME"] = str(self.terminal_user)
                self.apps[app] = subprocess.Popen(
                    argv,
                    cwd=self.home,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # its own session and process group, killed whole on reset
                    preexec_fn=die_with_parent,
                )
            await self.activate(await self.wait_window(app))
            await self._steady(app)
            return ""

    async def _steady(self, app: str, quiet_s: float = 0.1, timeout_s: float = 3.0) -> None:
        """Waits until ``app``'s window has the focus and the window list has stopped changing.

        A starting GTK program may map, remap or present its window more than once; returning before it
        has finished would let it take the focus back from the next window the agent activates.
        """
        deadline = time.monotonic() + timeout_s
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            wins = self.windows()
            key = [(w["id"], w["x"], w["y"], w["w"], w["h"], w["focused"]) for w in wins]
            if key != last:
                last, since = key, time.monotonic()
            mine = next((w for w in wins if w["app"] == app), None)
            if mine is not None and not mine["focused"]:
                await self.activate(mine)
            elif mine is not None and time.monotonic() - since >= quiet_s:
                return
            await asyncio.sleep(0.03)

    def _kill_group(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    async def reset_session(
        self, restore_home: bool = True, keep_browser: bool = True, url: str = ""
    ) -> None:
        """Kills the session apps, restores home from the template and wipes (or relaunches) the browser."""
        async with self._lock:
            for proc in self.apps.values():
                self._kill_group(proc)
            self.apps.clear()
            # windows of anything else started during the episode (from the terminal, say) go too
            for w in self.x.list():
                if w.pid and w.pid not in (self.browser.pid, os.getpid()):
                    try:
                        os.kill(w.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            if restore_home:
                self.home_dir.restore()
            if not self.with_browser:
                return
            if keep_browser and self.browser.alive():
                try:
                    await self.browser.scrub(self.settle_timeout_s)
                except CDPError:
                    await self.browser.launch()
            else:
                await self.browser.launch()
            if url:
                await self.browser.navigate(url, self.settle_timeout_s)
            await self.activate(await self.wait_window("browser"))

    def _terminal_prefix(self) -> list[str]:
        """The argv prefix that runs the terminal as ``terminal_user`` (no other groups, no capabilities,
        no_new_privs) in a network namespace of its own: the node's loopback services (the app host's control
        endpoint, Chromium's DevTools port, Ray) are out of its reach; X is reached through its socket file.
        Raises PermissionError (the model sees it as the action's error) when that is not possible."""
        try:
            pw = pwd.getpwnam(str(self.terminal_user))
        except KeyError:
            raise PermissionError(f"the terminal's user {self.terminal_user!r} does not exist") from None
        if pw.pw_uid == 0:
            raise PermissionError("the terminal may not run as root")
        if os.geteuid() != 0:
            raise PermissionError("the terminal needs the agent to run as root, to drop to its own user")
        return [
            *("unshare", "--net", "--", "setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}"),
            *("--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"),
        ]

    async def close(self) -> None:
        """Stops every session app and the browser."""
        for proc in self.apps.values():
            self._kill_group(proc)
        await self.browser.kill()
        self._shots.shutdown(wait=False)
        self.x.close()


async def serve(args: argparse.Namespace) -> None:
    """Starts the agent and the session browser, announces the port, and serves until SIGTERM."""
    token = Path(args.token_file).read_text().strip()
    if not token:
        raise SystemExit("the token file is empty")
    if args.consume_token:  # programs in the desktop run as the same user: leave no token for them to read
        Path(args.token_file).unlink()
    home = Path(args.home)
    agent = Agent(
        args.display,
        token,
        home,
        Path(args.home_template) if args.home_template else None,
        Path(args.session_dir or home.parent / "session"),
        args.chromium,
        args.width,
        args.height,
        args.settle_timeout,
        args.terminal_user or None,
    )
    agent.home_dir.restore()
    agent.with_browser = not args.no_browser
    if agent.with_browser:
        await agent.browser.launch(args.url)
        await agent.activate(await agent.wait_window("browser", 30.0))
    runner = web.AppRunner(make_app(agent), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.bind, args.port)
    await site.start()
    port = runner.addresses[0][1]
    if args.port_file:
        tmp = Path(args.port_file + ".tmp")
        tmp.write_text(str(port))
        tmp.replace(args.port_file)  # atomic: a reader never sees a half-written port
    print(f"READY {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def watchdog() -> None:
        while True:  # touching a dead X connection makes Xlib exit the process: no agent outlives its display
            await asyncio.sleep(2.0)
            agent.x.active()

    dog = asyncio.ensure_future(watchdog())
    await stop.wait()
    dog.cancel()
    await agent.close()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description="maigym_ray desktop guest agent")
    ap.add_argument("--display", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--consume-token", action="store_true", help="delete the token file once read")
    ap.add_argument("--home", required=True)
    ap.add_argument("--home-template", default="")
    ap.add_argument("--session-dir", default="")
    ap.add_argument("--port-file", default="")
    ap.add_argument("--chromium", default="")
    ap.add_argument("--url", default="about:blank", help="the page the session browser starts on")
    ap.add_argument("--no-browser", action="store_true", help="do not start the session browser")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=800)
    ap.add_argument("--settle-timeout", type=float, default=10.0, help="longest page load after an action")
    ap.add_argument(
        "--terminal-user", default="", help="offer a terminal, run as this (unprivileged) user; none if empty"
    )
    args = ap.parse_args(argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
