"""A minimal Chrome DevTools Protocol client over one WebSocket (aiohttp), with flattened target sessions.

The guest agent reads the desktop Chromium's DOM through it. Playwright's ``connect_over_cdp`` would work too,
but it adds a node.js driver process (tens of MB) per desktop and a relay hop on every call; the agent needs
only a handful of commands.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import aiohttp


class CDPError(Exception):
    """A CDP command failed, the connection dropped, or it timed out."""


class CDP:
    """One browser-level CDP connection; commands may carry a ``session_id`` of an attached target."""

    def __init__(self) -> None:
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        """True while the WebSocket is open."""
        return self._ws is not None and not self._ws.closed

    async def connect(self, ws_url: str, timeout_s: float = 5.0) -> None:
        """Opens the browser WebSocket (``ws://127.0.0.1:PORT/devtools/browser/...``)."""
        self._http = aiohttp.ClientSession()
        try:
            self._ws = await self._http.ws_connect(ws_url, max_msg_size=0, timeout=timeout_s)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            await self.close()
            raise CDPError(f"cannot connect to {ws_url}: {exc}") from exc
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for msg in self._ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                data = json.loads(msg.data)
                fut = self._waiting.pop(data.get("id", -1), None)
                if fut is not None and not fut.done():
                    if "error" in data:
                        fut.set_exception(CDPError(data["error"].get("message", str(data["error"]))))
                    else:
                        fut.set_result(data.get("result", {}))
        except Exception:  # the socket broke: fail every waiter below
            pass
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(CDPError("the DevTools connection closed"))
        self._waiting.clear()

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session_id: str = "", timeout_s: float = 10.0
    ) -> dict[str, Any]:
        """Sends one command and returns its result; raises CDPError on a protocol error or timeout."""
        if not self.connected:
            raise CDPError("not connected")
        msg_id = next(self._ids)
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = fut
        try:
            await self._ws.send_str(json.dumps(msg))  # type: ignore[union-attr]
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError as exc:
            raise CDPError(f"{method} timed out after {timeout_s}s") from exc
        except (aiohttp.ClientError, ConnectionError, RuntimeError) as exc:
            raise CDPError(f"{method}: {exc}") from exc
        finally:
            self._waiting.pop(msg_id, None)

    async def close(self) -> None:
        """Closes the connection (idempotent, never raises)."""
        for closer in (self._ws, self._http):
            if closer is not None:
                try:
                    await closer.close()
                except Exception:  # already gone
                    pass
        if self._reader is not None:
            self._reader.cancel()
        self._ws = self._http = self._reader = None
