"""BrowserHost: the per-node shared Chromium and its one Playwright driver, run as an async Ray actor.

Every env actor on the node opens its own browser context here and drives it by page id, so a node pays for
one Chromium browser process and one Playwright driver, not one per environment (``benchmarks/env_ops.py``
measures both layouts). Chromium is launched by Playwright over a pipe: it listens on no port at all. If the
browser dies, every page of it reports :class:`BackendError`, and the next ``open`` launches a fresh browser, so
replaced instances recover.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

from maigym_ray.envs.backends.chromium import launch_chromium
from maigym_ray.errors import BackendError
from maigym_ray.types import Action

# Playwright is imported inside the methods: env actors deserialize this actor's handle (which imports this
# module) and must not pay for Playwright in every instance's process.


class BrowserHost:
    """Owns a shared Chromium and the pages (PageDriver) that env actors open in it."""

    def __init__(self, executable: str = "") -> None:
        self.executable = executable
        self._pw: Any = None
        self._browser: Any = None
        self._pages: dict[str, Any] = {}
        self._owners: dict[str, str] = {}  # page id -> the instance that opened it
        self._groups: dict[str, Any] = {}  # context group -> its shared browser context
        self._group_of: dict[str, str] = {}  # page id -> its context group
        self._group_lock = asyncio.Lock()
        self._lock = asyncio.Lock()
        self.generation = 0

    async def _ensure(self) -> Any:
        from playwright.async_api import async_playwright

        async with self._lock:
            if self._browser is None or not self._browser.is_connected():
                self._pages.clear()  # pages of a dead browser are gone with it
                self._owners.clear()
                self._groups.clear()
                self._group_of.clear()
                if self._pw is None:
                    self._pw = await async_playwright().start()
                self._browser = await launch_chromium(self._pw, self.executable)
                self.generation += 1
            return self._browser

    def _driver(self, page_id: str) -> Any:
        d = self._pages.get(page_id)
        if d is None:
            raise BackendError(f"page {page_id[:8]} is gone (the shared browser was restarted)")
        return d

    async def open(self, owner: str = "", context_group: str = "", **driver_args: Any) -> str:
        """Opens a context + page (PageDriver arguments); returns its page id. ``owner`` (the env instance's id)
        lets :meth:`release` close it when that instance dies without closing it. Pages of one
        ``context_group`` (the instances of one env actor group) share one browser context, which Chromium
        serves with one renderer process (``--process-per-site``); it closes with its last page."""
        from maigym_ray.envs.backends.page import PageDriver

        driver = PageDriver(**driver_args)
        browser = await self._ensure()
        context = None
        if context_group:
            async with self._group_lock:  # the group's first pages may open at once: one context for all
                context = self._groups.get(context_group)
                if context is None:
                    context = self._groups[context_group] = await driver.new_context(browser)
        await driver.open(browser, context=context)
        page_id = uuid.uuid4().hex
        self._pages[page_id] = driver
        if owner:
            self._owners[page_id] = owner
        if context_group:
            self._group_of[page_id] = context_group
        return page_id

    async def reset(self, page_id: str, url: str) -> None:
        """PageDriver.reset on ``page_id``."""
        await self._driver(page_id).reset(url)

    async def observe(self, page_id: str, screenshot: bool = True) -> dict[str, Any]:
        """PageDriver.observe on ``page_id``."""
        return await self._driver(page_id).observe(screenshot)

    async def act(self, page_id: str, action: Action) -> str:
        """PageDriver.act on ``page_id``."""
        return await self._driver(page_id).act(action)

    async def act_and_observe(self, page_id: str, action: Action, screenshot: bool = True) -> tuple[str, Any]:
        """PageDriver.act_and_observe on ``page_id``."""
        return await self._driver(page_id).act_and_observe(action, screenshot)

    async def evaluate(self, page_id: str, script: str, arg: Any = None) -> Any:
        """PageDriver.evaluate on ``page_id``."""
        return await self._driver(page_id).evaluate(script, arg)

    async def health(self, page_id: str) -> bool:
        """PageDriver.health on ``page_id`` (False when the page is gone)."""
        d = self._pages.get(page_id)
        return d is not None and await d.health()

    async def close_page(self, page_id: str) -> None:
        """Closes one page's context."""
        d = self._pages.pop(page_id, None)
        self._owners.pop(page_id, None)
        group = self._group_of.pop(page_id, None)
        if d is not None:
            await d.close()
        if group and group not in self._group_of.values():  # its last page: the context goes too
            context = self._groups.pop(group, None)
            if context is not None:
                try:
                    await asyncio.wait_for(context.close(), 5)
                except Exception:  # the browser may already be gone
                    pass

    async def release(self, owner: str) -> int:
        """Closes every page ``owner`` opened (a SIGKILLed env actor leaves its context open); returns how many."""
        mine = [p for p, o in self._owners.items() if o == owner]
        for page_id in mine:
            try:
                await asyncio.wait_for(self.close_page(page_id), 10)
            except Exception:  # a dead browser took the page with it
                pass
        return len(mine)

    def pages(self) -> int:
        """How many pages are open."""
        return len(self._pages)

    def pids(self) -> dict[str, Any]:
        """This actor's pid and the browser's (for memory accounting and crash tests)."""
        import psutil

        browser = 0
        for child in psutil.Process().children(recursive=True):
            try:
                cmd = child.cmdline()
            except psutil.Error:
                continue
            if cmd and "chrom" in os.path.basename(cmd[0]) and not any(a.startswith("--type=") for a in cmd):
                browser = child.pid
        return {"host": os.getpid(), "browser": browser}

    async def stop(self) -> None:
        """Closes the browser and the Playwright driver."""
        for closer in (self._browser.close if self._browser else None, self._pw.stop if self._pw else None):
            if closer is not None:
                try:
                    await asyncio.wait_for(closer(), 10)
                except Exception:  # shutting down: a dead browser has nothing left to close
                    pass
        self._browser = self._pw = None
