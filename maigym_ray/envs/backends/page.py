"""PageDriver: one browser context with one page, driven through Playwright.

It runs wherever the Playwright connection lives: inside the shared per-node :class:`BrowserHost` (one
Playwright driver and one Chromium for every env on the node) or inside an env actor that launched its own
browser (``per_env`` mode). It knows nothing about apps or tasks: it navigates, observes and performs actions.
Agent mistakes come back as strings; browser failures raise :class:`BackendError`.
"""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, BrowserContext, CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from maigym_ray.errors import BackendError
from maigym_ray.types import Action

_SNAPSHOT_JS = (Path(__file__).parent / "dom_snapshot.js").read_text()
# The element an action targets, scrolled into view, as its centre plus the viewport size in CSS pixels (shared
# with the desktop's Chromium, which maps it to screen pixels).
_FIND_JS = (Path(__file__).parent / "find_element.js").read_text()
_FOCUSED_EDITABLE_JS = """() => { const el = document.activeElement; return !!el && (el.isContentEditable ||
  el.tagName === 'TEXTAREA' || (el.tagName === 'INPUT' && !['radio','checkbox','submit','button'].includes(el.type))); }"""
# Resolves once the scroll position has not moved for a few frames (a fling has ended), or after 1 s.
_SCROLL_SETTLED_JS = """() => new Promise(done => {
  let last = -1, still = 0, frames = 0;
  const tick = () => {
    const y = window.scrollY + window.scrollX * 1e6;
    still = (y === last) ? still + 1 : 0; last = y;
    if (still >= 3 || ++frames > 60) done(); else requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})"""
# Marks, synchronously inside the input event, that a document navigation is about to start (a form submit or a
# link click that leaves the page). Reading it after the action tells us whether to wait for a load, with no
# guessing of how long a navigation takes to begin.
_NAV_MARKER_JS = """(() => {
  const mark = () => { window.__mgNav = 1; };
  document.addEventListener('submit', e => { if (!e.defaultPrevented) mark(); }, true);
  document.addEventListener('click', e => {
    const a = e.target && e.target.closest && e.target.closest('a[href]');
    if (!a) return;
    const href = a.getAttribute('href');
    if (href && !href.startsWith('#') && !href.startsWith('javascript:')) mark();
  }, true);
})();"""


class PageDriver:
    """A context + page of ``browser`` with a fixed viewport; ``mobile`` turns on touch emulation."""

    def __init__(
        self,
        width: int,
        height: int,
        mobile: bool,
        base_url: str,
        apps: list[str],
        settle_timeout_s: float = 10.0,
        wait_cap_s: float = 5.0,
        fresh_context: bool = True,
    ) -> None:
        self.width, self.height, self.mobile = width, height, mobile
        self.base_url, self.apps = base_url, list(apps)
        self.settle_timeout_s, self.wait_cap_s = settle_timeout_s, wait_cap_s
        self.fresh_context = fresh_context
        self._browser: Browser | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._cdp: CDPSession | None = None
        self._loads = 0
        self._load_evt = asyncio.Event()
        self._crashed = False
        self._shared = (
            False  # the context is a group's (BrowserHost.open with context_group): not ours to close
        )

    async def new_context(self, browser: Browser) -> BrowserContext:
        """A context with this driver's viewport and our page scripts (for this page, or a group's pages)."""
        context = await browser.new_context(
            viewport={"width": self.width, "height": self.height},
            is_mobile=self.mobile,
            has_touch=self.mobile,
            device_scale_factor=1,
            service_workers="block",
        )
        await context.add_init_script(_NAV_MARKER_JS)
        return context

    async def open(self, browser: Browser, url: str = "", context: BrowserContext | None = None) -> None:
        """Opens a page on ``browser`` in a fresh context, or in the shared ``context`` (a group's: made by
        :meth:`new_context`), and shows ``url`` (default: the launcher)."""
        self._browser = browser
        self._shared = context is not None
        try:
            self._context = context if context is not None else await self.new_context(browser)
            self._page = await self._context.new_page()
            self._cdp = await self._context.new_cdp_session(self._page)
            self._page.on("load", self._on_load)
            self._page.on("crash", self._on_crash)
            await self._goto(url or f"{self.base_url}/")
        except PlaywrightError as exc:
            await self.close()
            raise BackendError(f"could not open a browser page: {exc}") from exc

    async def close(self) -> None:
        """Closes the context, or only the page in a shared one (never raises)."""
        target = self._page if self._shared else self._context
        if target is not None:
            try:
                await asyncio.wait_for(target.close(), 5)
            except Exception:  # the browser may already be gone; nothing left to release then
                pass
        self._context = self._page = self._cdp = None

    # -- navigation settling --------------------------------------------------------------------------------
    def _on_load(self, _page: Any) -> None:
        self._loads += 1
        self._load_evt.set()

    def _on_crash(self, _page: Any) -> None:
        self._crashed = True

    def _require(self) -> Page:
        if self._page is None or self._crashed or self._page.is_closed():
            raise BackendError("the page is gone (browser crashed or closed)")
        if not self._page.context.browser or not self._page.context.browser.is_connected():
            raise BackendError("the browser is disconnected")
        return self._page

    async def _settle(self, loads_before: int) -> None:
        """Waits for the load of a navigation the action started (if any), judged by the in-page marker."""
        page = self._require()
        try:
            navigating = bool(await page.evaluate("window.__mgNav === 1"))
        except PlaywrightError:
            navigating = True  # the old document is already gone: a navigation is under way
        if not navigating:
            return
        deadline = time.monotonic() + self.settle_timeout_s
        while self._loads == loads_before:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(f"page did not finish loading within {self.settle_timeout_s}s")
            self._load_evt.clear()
            try:
                await asyncio.wait_for(self._load_evt.wait(), min(left, 0.25))
            except TimeoutError:
                self._require()

    async def _goto(self, url: str) -> None:
        await self._require().goto(url, wait_until="load", timeout=self.settle_timeout_s * 1000)

    # -- operations -----------------------------------------------------------------------------------------
    async def reset(self, url: str) -> None:
        """Brings the page to ``url`` with nothing left of the previous episode.

        ``fresh_context`` (the default): the old context is closed and a new one opened, so cookies, storage,
        cache, history and the renderer process are all new; the renderer's memory also stays bounded
        (reusing one page grew it from 22 to 42 MB over 30 episodes). Otherwise: cookies are cleared, the page
        reloads ``url`` and the history is wiped (about 60 ms faster).
        """
        self._require()
        if self.fresh_context and not self._shared:
            await self.close()
            await self.open(self._browser, url)  # type: ignore[arg-type]
            return
        try:
            if not self._shared:  # a shared context's cookies are its other pages' too
                await self._context.clear_cookies()  # type: ignore[union-attr]
            await self._goto(url)
            await self._cdp.send("Page.resetNavigationHistory")  # type: ignore[union-attr]
        except PlaywrightError as exc:
            raise BackendError(f"reset failed: {exc}") from exc

    async def observe(self, screenshot: bool = True) -> dict[str, Any]:
        """``{"png", "a11y", "elements", "url", "title"}`` of the current screen."""
        page = self._require()
        try:
            if screenshot:  # the DOM pass and the compositor capture overlap
                snap, png = await asyncio.gather(page.evaluate(_SNAPSHOT_JS), self._screenshot())
                snap["png"] = png
            else:
                snap = await page.evaluate(_SNAPSHOT_JS)
                snap["png"] = b""
        except PlaywrightError as exc:
            raise BackendError(f"observe failed: {exc}") from exc
        return snap

    async def _screenshot(self) -> bytes:
        # CDP capture is the fast path (~25 ms); right after a navigation the compositor may have no frame yet
        # ("Unable to capture screenshot"), so wait for one and retry, then fall back to Playwright's capture.
        page = self._require()
        for _ in range(3):
            try:
                shot = await self._cdp.send(  # type: ignore[union-attr]
                    "Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}
                )
                return base64.b64decode(shot["data"])
            except PlaywrightError as exc:
                if "Unable to capture screenshot" not in str(exc):
                    raise
                await page.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")
        return await page.screenshot(type="png")

    async def act_and_observe(self, action: Action, screenshot: bool = True) -> tuple[str, dict[str, Any]]:
        """``act`` then ``observe`` in one call (one round trip for callers in another process)."""
        error = await self.act(action)
        return error, await self.observe(screenshot)

    async def evaluate(self, script: str, arg: Any = None) -> Any:
        """Runs ``script`` (a JS function, ours, never model output) in the page and returns its JSON result.

        Suites whose pages report their own state (MiniWoB++'s reward globals) read it through this."""
        try:
            return await self._require().evaluate(script, arg)
        except PlaywrightError as exc:
            raise BackendError(f"page script failed: {exc}") from exc

    async def health(self) -> bool:
        """True when the page answers within 3 s."""
        try:
            return await asyncio.wait_for(self._require().evaluate("1 + 1"), 3) == 2
        except Exception:
            return False

    async def _point(self, args: dict[str, Any], prefix: str = "") -> tuple[float, float] | str:
        """Pixel coordinates of a target (element id or normalised x/y), or an agent-mistake message."""
        if f"{prefix}id" in args:
            found = await self._require().evaluate(_FIND_JS, args[f"{prefix}id"])
            if found is None:
                return f"no visible element with id {args[prefix + 'id']!r} on this screen"
            return found["x"], found["y"]
        return args[f"{prefix}x"] * self.width / 1000, args[f"{prefix}y"] * self.height / 1000

    async def _tap(self, x: float, y: float) -> None:
        page = self._require()
        if self.mobile:
            await page.touchscreen.tap(x, y)
        else:
            await page.mouse.click(x, y)

    async def _touch(self, kind: str, x: float, y: float) -> None:
        pts = [] if kind == "touchEnd" else [{"x": x, "y": y}]
        await self._cdp.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": pts})  # type: ignore[union-attr]

    async def act(self, action: Action) -> str:
        """Performs one grammar action; returns "" or the agent's mistake. Browser failures raise BackendError."""
        try:
            loads_before = self._loads
            error = await self._act(action)
            if not error:
                await self._settle(loads_before)
            return error
        except PlaywrightError as exc:
            raise BackendError(f"{action.name} failed in the browser: {exc}") from exc

    async def _act(self, action: Action) -> str:
        page = self._require()
        a, name = action.args, action.name
        if name in ("click", "long_press"):
            pt = await self._point(a)
            if isinstance(pt, str):
                return pt
            if name == "click":
                await self._tap(*pt)
            else:
                await self._touch("touchStart", *pt)
                await asyncio.sleep(a.get("duration_ms", 800) / 1000)
                await self._touch("touchEnd", *pt)
        elif name == "type":
            targeted = "id" in a or "x" in a
            if targeted:
                pt = await self._point(a)
                if isinstance(pt, str):
                    return pt
                await self._tap(*pt)
            if not await page.evaluate(_FOCUSED_EDITABLE_JS):
                return "type: no text field is focused; give the field's id or click it first"
            if targeted:  # a target means "set the field to text"; without one, text goes in at the caret
                await page.keyboard.press("Control+A")
                await page.keyboard.press("Delete")
            if a["text"]:
                await page.keyboard.insert_text(a["text"])
            if a.get("enter"):
                await page.keyboard.press("Enter")
        elif name == "scroll":
            pt = await self._point(a) if ("id" in a or "x" in a) else (self.width / 2, self.height / 2)
            if isinstance(pt, str):
                return pt
            d = a["direction"]
            amount = a.get("amount") or int((self.height if d in ("up", "down") else self.width) * 0.6)
            await page.mouse.move(*pt)
            await page.mouse.wheel(
                {"left": -amount, "right": amount}.get(d, 0), {"up": -amount, "down": amount}.get(d, 0)
            )
            await page.evaluate(_SCROLL_SETTLED_JS)  # let the scroll land before the screenshot
        elif name == "swipe":
            # Raw touch events (like adb's `input swipe`); Chromium turns them into a scroll and maybe a fling.
            fx, fy = a["from_x"] * self.width / 1000, a["from_y"] * self.height / 1000
            tx, ty = a["to_x"] * self.width / 1000, a["to_y"] * self.height / 1000
            await self._touch("touchStart", fx, fy)
            for i in range(1, 9):
                await self._touch("touchMove", fx + (tx - fx) * i / 8, fy + (ty - fy) * i / 8)
            await self._touch("touchEnd", tx, ty)
            await page.evaluate(_SCROLL_SETTLED_JS)
        elif name == "drag":
            src, dst = await self._point(a, "from_"), await self._point(a, "to_")
            if isinstance(src, str) or isinstance(dst, str):
                return src if isinstance(src, str) else str(dst)
            await page.mouse.move(*src)
            await page.mouse.down()
            await page.mouse.move(*dst, steps=8)
            await page.mouse.up()
        elif name in ("key", "hotkey"):
            await page.keyboard.press(a["key"] if name == "key" else "+".join(a["keys"]))
        elif name == "open_app":
            if a["name"] not in self.apps:
                return f"no app named {a['name']!r}; installed apps: {', '.join(self.apps)}"
            await self._goto(f"{self.base_url}/{a['name']}/")
        elif name == "navigate_home":
            await self._goto(f"{self.base_url}/")
        elif name == "navigate_back":
            if await page.go_back(wait_until="load", timeout=self.settle_timeout_s * 1000) is None:
                return "navigate_back: there is no previous screen"
        elif name == "wait":
            await asyncio.sleep(min(float(a.get("seconds", 1.0)), self.wait_cap_s))
        return ""  # answer / terminate change nothing on screen


class LocalPage:
    """A page in a Chromium that this process launches for itself (``per_env`` mode)."""

    def __init__(self, executable: str = "") -> None:
        self.executable = executable
        self._pw: Any = None
        self._browser: Browser | None = None
        self._driver: PageDriver | None = None

    async def open(self, **driver_args: Any) -> None:
        from playwright.async_api import async_playwright

        from maigym_ray.envs.backends.chromium import launch_chromium

        self._pw = await async_playwright().start()
        self._browser = await launch_chromium(self._pw, self.executable)
        self._driver = PageDriver(**driver_args)
        await self._driver.open(self._browser)

    def _d(self) -> PageDriver:
        if self._driver is None:
            raise BackendError("the page is not open")
        return self._driver

    async def reset(self, url: str) -> None:
        await self._d().reset(url)

    async def observe(self, screenshot: bool = True) -> dict[str, Any]:
        return await self._d().observe(screenshot)

    async def act(self, action: Action) -> str:
        return await self._d().act(action)

    async def act_and_observe(self, action: Action, screenshot: bool = True) -> tuple[str, dict[str, Any]]:
        return await self._d().act_and_observe(action, screenshot)

    async def evaluate(self, script: str, arg: Any = None) -> Any:
        return await self._d().evaluate(script, arg)

    async def health(self) -> bool:
        return self._driver is not None and await self._driver.health()

    async def close(self) -> None:
        for closer in (
            self._driver.close if self._driver else None,
            self._browser.close if self._browser else None,
            self._pw.stop if self._pw else None,
        ):
            if closer is not None:
                try:
                    await closer()
                except Exception:  # discarding the instance: a dead browser has nothing left to close
                    pass
        self._driver = self._browser = self._pw = None
