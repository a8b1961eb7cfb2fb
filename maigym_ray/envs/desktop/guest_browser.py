"""The desktop's Chromium, as the guest agent runs it: a real headful window plus a DevTools connection.

The agent launches Chromium full-screen (kiosk) on the desktop's display with ``--remote-debugging-port`` on
127.0.0.1 inside the guest and reads the page's DOM with the repository's ``dom_snapshot.js``, so element ids
(``data-mg-id``) are the same as in the web backend. Input never goes through DevTools: it is real X input
(xdotool) from the agent; DevTools only observes, navigates, resets and tells when the page has settled.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from maigym_ray.envs.desktop.cdp import CDP, CDPError

_SNAPSHOT_JS = (Path(__file__).parent.parent / "backends" / "dom_snapshot.js").read_text()
_FIND_JS = (Path(__file__).parent.parent / "backends" / "find_element.js").read_text()
# Installed in every document: counts input events that reached the page and marks a document navigation that
# an input started (form submit, link click), so the agent can tell when X input has landed and settled.
_PROBE_JS = """(() => {
  if (window.__mg) return;
  window.__mg = {n: 0, nav: 0, doc: Math.random()};
  for (const t of ['mousedown', 'mouseup', 'keydown', 'keyup', 'wheel'])
    addEventListener(t, () => { window.__mg.n++; }, true);
  document.addEventListener('submit', e => { if (!e.defaultPrevented) window.__mg.nav = 1; }, true);
  document.addEventListener('click', e => {
    const a = e.target && e.target.closest && e.target.closest('a[href]');
    if (!a) return;
    const href = a.getAttribute('href');
    if (href && !href.startsWith('#') && !href.startsWith('javascript:')) window.__mg.nav = 1;
  }, true);
})()"""
_STATE_JS = """(() => { const m = window.__mg || {n: 0, nav: 0, doc: 0};
  return [m.n, m.doc, m.nav, document.readyState]; })()"""
_FOCUSED_EDITABLE_JS = """(() => { const el = document.activeElement; return !!el && (el.isContentEditable ||
  el.tagName === 'TEXTAREA' ||
  (el.tagName === 'INPUT' && !['radio','checkbox','submit','button'].includes(el.type))); })()"""
_SCROLL_SETTLED_JS = """new Promise(done => {
  let last = -1, still = 0, frames = 0;
  const tick = () => {
    const y = window.scrollY + window.scrollX * 1e6;
    still = (y === last) ? still + 1 : 0; last = y;
    if (still >= 3 || ++frames > 60) done(); else requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})"""

#: How long :meth:`GuestBrowser.settle` waits for input of a known count (a click's press and release) to reach
#: the page, and for input of unknown count to start arriving.
EXPECTED_INPUT_WAIT_S = 5.0
QUIET_INPUT_WAIT_S = 0.5

#: Flags of the desktop Chromium (headful, kiosk). ``--test-type`` hides the "unsupported --no-sandbox" info
#: bar, which would otherwise shift the page down. A single --disable-features (Chromium keeps the last one).
CHROMIUM_DESKTOP_FLAGS: tuple[str, ...] = (
    "--no-sandbox",
    "--test-type",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-quic",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--disable-dev-shm-usage",
    "--password-store=basic",
    "--noerrdialogs",
    "--disable-session-crashed-bubble",
    "--disable-back-forward-cache",
    "--disable-features=Translate,MediaRouter,OptimizationHints,BackForwardCache",
    "--kiosk",
)
_DESKTOP_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser")


# Resolved once here: between fork and exec (in a possibly multi-threaded parent such as a Ray worker) the
# child must not load libraries, which takes the dynamic loader's lock.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent() -> None:
    """``preexec_fn``: the child gets SIGKILL when its parent dies (the env actor, or for session apps the
    agent), so a process killed without cleanup leaves nothing running."""
    _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def find_desktop_chromium(explicit: str = "") -> str:
    """The real headful Chromium binary (never Debian's wrapper script, never the headless shell)."""
    for cand in (explicit, os.environ.get("MAIGYM_DESKTOP_CHROMIUM", ""), *_DESKTOP_CANDIDATES):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("chromium") or shutil.which("google-chrome")
    if not found:
        raise FileNotFoundError("no headful Chromium found (apt-get install chromium)")
    return found


class GuestBrowser:
    """One Chromium process with its own profile; ``launch`` again for a fresh one."""

    def __init__(self, binary: str, profile_dir: Path, env: dict[str, str], width: int, height: int) -> None:
        self.binary, self.profile_dir, self.env = binary, profile_dir, env
        self.width, self.height = width, height
        self.proc: subprocess.Popen[bytes] | None = None
        self.cdp = CDP()
        self.session = ""
        self.target = ""

    @property
    def pid(self) -> int:
        """The browser process id (0 when not running)."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else 0

    def alive(self) -> bool:
        """True while the process runs and DevTools is connected."""
        return bool(self.pid) and self.cdp.connected

    async def launch(self, url: str = "about:blank", timeout_s: float = 20.0) -> None:
        """Kills any previous instance, starts Chromium on a fresh profile and attaches to its page."""
        await self.kill()
        shutil.rmtree(self.profile_dir, ignore_errors=True)
        self.profile_dir.mkdir(parents=True)
        argv = [
            self.binary,
            *CHROMIUM_DESKTOP_FLAGS,
            f"--user-data-dir={self.profile_dir}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",  # Chromium picks a free port and writes it to DevToolsActivePort
            "--window-position=0,0",
            f"--window-size={self.width},{self.height}",
            url,
        ]
        self.proc = subprocess.Popen(
            argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        port_file = self.profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Chromium exited with {self.proc.returncode} during start")
            lines = port_file.read_text().split("\n") if port_file.exists() else []
            if len(lines) >= 2 and lines[1]:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not open DevTools within {timeout_s}s")
            await asyncio.sleep(0.02)
        self.cdp = CDP()
        await self.cdp.connect(f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}")
        await self.attach()

    async def attach(self) -> None:
        """Attaches to the (first) page target and installs the input probe in it."""
        targets = (await self.cdp.send("Target.getTargets"))["targetInfos"]
        pages = [t for t in targets if t["type"] == "page"]
        if not pages:
            self.target = (await self.cdp.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        else:
            self.target = pages[0]["targetId"]
        res = await self.cdp.send("Target.attachToTarget", {"targetId": self.target, "flatten": True})
        self.session = res["sessionId"]
        await self.send("Page.enable")
        await self.send("Page.addScriptToEvaluateOnNewDocument", {"source": _PROBE_JS})
        try:
            await self.evaluate(_PROBE_JS)
        except CDPError:  # the first document may still be committing; the init script covers the next one
            pass

    async def kill(self) -> None:
        """Kills the browser's process group and drops the connection (never raises)."""
        await self.cdp.close()
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await asyncio.to_thread(self.proc.wait)
        self.proc = None

    async def send(
        self, method: str, params: dict[str, Any] | None = None, timeout_s: float = 10.0
    ) -> dict[str, Any]:
        """A command to the attached page."""
        return await self.cdp.send(method, params, self.session, timeout_s)

    async def evaluate(self, expression: str, timeout_s: float = 10.0) -> Any:
        """Evaluates ``expression`` in the page (awaiting promises) and returns its JSON value."""
        res = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout_s,
        )
        if "exceptionDetails" in res:
            raise CDPError(f"page script failed: {res['exceptionDetails'].get('text', '')}")
        return res.get("result", {}).get("value")

    async def call(self, function: str, *args: Any) -> Any:
        """Calls a JS function expression with JSON arguments."""
        return await self.evaluate(f"({function})(...{json.dumps(list(args))})")

    # -- page operations ------------------------------------------------------------------------------------
    async def probe(self) -> list[Any] | None:
        """``[input events seen, document token, navigation started, readyState]``; None mid-navigation."""
        try:
            return await self.evaluate(_STATE_JS, 2.0)
        except CDPError:
            return None

    async def wait_loaded(self, old_doc: Any, timeout_s: float) -> None:
        """Waits until a document other than ``old_doc`` has finished loading."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st = await self.probe()
            if st is not None and st[1] != old_doc and st[3] == "complete":
                return
            await asyncio.sleep(0.015)
        raise CDPError(f"the page did not finish loading within {timeout_s}s")

    async def navigate(self, url: str, timeout_s: float = 10.0) -> None:
        """Loads ``url`` in the page and waits for its load."""
        st = await self.probe()
        res = await self.send("Page.navigate", {"url": url}, timeout_s)
        if res.get("errorText"):
            raise CDPError(f"navigation to {url} failed: {res['errorText']}")
        await self.wait_loaded(st[1] if st else None, timeout_s)

    async def back(self, timeout_s: float = 10.0) -> bool:
        """Goes one entry back in the page's history; False when there is none."""
        hist = await self.send("Page.getNavigationHistory")
        idx = hist["currentIndex"]
        if idx <= 0:
            return False
        st = await self.probe()
        await self.send("Page.navigateToHistoryEntry", {"entryId": hist["entries"][idx - 1]["id"]})
        await self.wait_loaded(st[1] if st else None, timeout_s)
        return True

    async def scrub(self, timeout_s: float = 10.0) -> None:
        """Wipes what a previous episode left: other tabs, cookies, cache, storage and history."""
        targets = (await self.cdp.send("Target.getTargets"))["targetInfos"]
        for t in targets:
            if t["type"] == "page" and t["targetId"] != self.target:
                await self.cdp.send("Target.closeTarget", {"targetId": t["targetId"]})
        try:  # storage of the current origin (the apps store everything else server-side)
            await self.evaluate("try { localStorage.clear(); sessionStorage.clear(); } catch (e) {}", 2.0)
        except CDPError:
            pass
        await self.send("Network.clearBrowserCookies")
        await self.send("Network.clearBrowserCache")
        await self.navigate("about:blank", timeout_s)
        await self.send("Page.resetNavigationHistory")

    async def snapshot(self) -> dict[str, Any]:
        """The page's accessibility text and elements (viewport coordinates) plus its inner size."""
        js = f"(() => {{ const s = ({_SNAPSHOT_JS})(); s.iw = innerWidth; s.ih = innerHeight; return s; }})()"
        return await self.evaluate(js)

    async def find(self, element_id: str) -> tuple[float, float, int, int] | None:
        """Viewport centre of the element with ``element_id`` (scrolled into view) and the viewport size."""
        found = await self.call(_FIND_JS, element_id)
        return (found["x"], found["y"], found["iw"], found["ih"]) if found else None

    async def focused_editable(self) -> bool:
        """True when a text field has the keyboard focus."""
        return bool(await self.evaluate(_FOCUSED_EDITABLE_JS))

    async def settle(
        self, before: list[Any] | None, scrolled: bool, timeout_s: float, expect: int = 0
    ) -> None:
        """Waits until X input sent after ``before`` (a probe) reached the page and what it started is done.

        X input is asynchronous: xdotool returns once the X server has the events, before Chromium has handled
        them. So we wait for the page's input counter to grow by ``expect`` events (or to move and then hold
        still), follow a navigation the input started to its load, and let a scroll come to rest.
        """
        if before is None:
            return
        # A click's events are known to come (the point is on the focused page), so wait for them as long as the
        # machine needs: under load Chromium can take over 0.5 s to handle them, and returning early let the next
        # action look for its element on the old page (a flaky desktop golden). Input of unknown count (typing,
        # keys, scrolls) has only the quiet window to go by.
        window = min(timeout_s, EXPECTED_INPUT_WAIT_S) if expect else QUIET_INPUT_WAIT_S
        t0 = time.monotonic()
        last = None
        while time.monotonic() - t0 < window:
            st = await self.probe()
            if st is None or st[1] != before[1] or st[2]:
                await self.wait_loaded(before[1], timeout_s)  # a navigation started: wait for the new page
                return
            if (expect and st[0] >= before[0] + expect) or (st[0] > before[0] and st[0] == last):
                break  # the expected events arrived, or events arrived and stopped arriving
            last = st[0] if st[0] > before[0] else None
            await asyncio.sleep(0.01)
        if scrolled:
            await self.evaluate(_SCROLL_SETTLED_JS, 3.0)
        st = await self.probe()
        if st is not None and st[2]:
            await self.wait_loaded(before[1], timeout_s)
