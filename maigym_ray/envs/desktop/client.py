"""AgentClient: the host side of the guest agent's HTTP API (aiohttp).

Connection failures, timeouts and 5xx answers raise :class:`~maigym_ray.errors.BackendError` (the desktop is
broken; the manager replaces the instance). A 401 also raises BackendError (a wrong token is an infrastructure
fault). 403/404 on files raise PermissionError/FileNotFoundError, which callers may turn into agent mistakes.
"""

from __future__ import annotations

import base64
from typing import Any

import aiohttp

from maigym_ray.envs.desktop.provider import AgentEndpoint
from maigym_ray.errors import BackendError


class AgentClient:
    """Talks to one desktop's guest agent; ``endpoint`` may be swapped after a provider reset."""

    def __init__(self, endpoint: AgentEndpoint, timeout_s: float = 30.0) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._http: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            # one keep-alive connection per desktop: a step costs no TCP handshake
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=4))
        return self._http

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | None = None,
        params: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[int, bytes]:
        url = self.endpoint.url.rstrip("/") + path
        headers = {"Authorization": f"Bearer {self.endpoint.token}"}
        try:
            async with self._session().request(
                method,
                url,
                json=json,
                data=data,
                params=params,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout_s or self.timeout_s),
            ) as resp:
                body = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise BackendError(f"desktop agent {method} {path} failed: {type(exc).__name__}: {exc}") from exc
        if status >= 500 or status == 401:
            raise BackendError(
                f"desktop agent {method} {path} answered {status}: {body[:300].decode(errors='replace')}"
            )
        return status, body

    async def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        import json as _json

        status, body = await self._request(method, path, **kw)
        try:
            data = _json.loads(body)
        except ValueError as exc:
            raise BackendError(f"desktop agent {path}: not JSON ({body[:100]!r})") from exc
        if status == 403:
            raise PermissionError(data.get("error", "forbidden"))
        if status == 404:
            raise FileNotFoundError(data.get("error", "not found"))
        if status >= 400:
            raise BackendError(f"desktop agent {path} rejected the request ({status}): {data.get('error')}")
        return data

    # -- API ------------------------------------------------------------------------------------------------
    async def health(self, timeout_s: float = 3.0) -> dict[str, Any]:
        """The agent's health document; raises BackendError when it does not answer."""
        return await self._json("GET", "/health", timeout_s=timeout_s)

    async def screenshot(self) -> bytes:
        """PNG of the whole screen."""
        return (await self._request("GET", "/screenshot"))[1]

    async def observe(self, screenshot: bool = True) -> dict[str, Any]:
        """Windows, the browser page's elements (screen pixels) and, with ``screenshot``, ``png`` as bytes."""
        data = await self._json("GET", "/observe", params={"screenshot": "1" if screenshot else "0"})
        data["png"] = base64.b64decode(data["png"]) if data.get("png") else b""
        return data

    async def act(self, op: str, **args: Any) -> str:
        """One input operation (click, double_click, move, type, key, hotkey, scroll, drag); "" or mistake."""
        return (await self._json("POST", "/act", json={"op": op, **args}))["error"]

    async def act_and_observe(
        self, op: str, screenshot: bool = True, **args: Any
    ) -> tuple[str, dict[str, Any]]:
        """``act`` then ``observe`` in one round trip."""
        data = await self._json(
            "POST", "/act", json={"op": op, "observe": True, "screenshot": screenshot, **args}
        )
        obs = data["observation"]
        obs["png"] = base64.b64decode(obs["png"]) if obs.get("png") else b""
        return data["error"], obs

    async def run_command(
        self,
        argv: list[str] | str,
        timeout_s: float = 30.0,
        shell: bool = False,
        cwd: str = "",
        stdin: str = "",
    ) -> dict[str, Any]:
        """Runs a command in the desktop: ``{"rc", "stdout", "stderr", "timed_out", "seconds"}``."""
        body = {"argv": argv, "timeout_s": timeout_s, "shell": shell, "cwd": cwd, "stdin": stdin}
        return await self._json("POST", "/exec", json=body, timeout_s=timeout_s + 10)

    async def get_file(self, path: str) -> bytes:
        """A file under the desktop's home (PermissionError outside it, FileNotFoundError when missing)."""
        status, body = await self._request("GET", "/file", params={"path": path})
        if status == 200:
            return body
        import json as _json

        msg = _json.loads(body).get("error", "") if body else ""
        if status == 403:
            raise PermissionError(msg)
        if status == 404:
            raise FileNotFoundError(msg)
        raise BackendError(f"desktop agent GET /file answered {status}: {msg}")

    async def put_file(self, path: str, data: bytes) -> None:
        """Writes a file under the desktop's home (parents are created)."""
        await self._json("PUT", "/file", params={"path": path}, data=data)

    async def files(self, max_bytes: int = 65536) -> list[dict[str, str]]:
        """Small text files under home: ``[{"path", "content"}]`` sorted by path (hidden ones skipped)."""
        return (await self._json("GET", "/files", params={"max_bytes": str(max_bytes)}))["files"]

    async def launch(self, app: str, url: str = "", path: str = "") -> str:
        """Starts or focuses a session app (browser, editor, terminal); "" or a mistake."""
        return (await self._json("POST", "/session/launch", json={"app": app, "url": url, "path": path}))[
            "error"
        ]

    async def reset_session(
        self, restore_home: bool = True, keep_browser: bool = True, url: str = ""
    ) -> None:
        """Kills the session apps, restores home and wipes (or relaunches) the browser."""
        body = {"restore_home": restore_home, "keep_browser": keep_browser, "url": url}
        await self._json("POST", "/session/reset", json=body)

    async def navigate(self, url: str) -> None:
        """Loads ``url`` in the session browser and waits for it."""
        await self._json("POST", "/browser/navigate", json={"url": url})

    async def back(self) -> str:
        """One step back in the browser's history; "" or a mistake."""
        return (await self._json("POST", "/browser/back", json={}))["error"]

    async def close(self) -> None:
        """Closes the HTTP session (never raises)."""
        if self._http is not None:
            try:
                await self._http.close()
            except Exception:  # nothing left to release
                pass
            self._http = None
