"""The real ``adb`` client binary, run as a subprocess per command, against one adb server per node (loopback).

adb's own failures (device offline, not found, a timeout) raise :class:`BackendError`; a command's output is
left for the caller to read.
"""

from __future__ import annotations

import asyncio
import contextlib

from maigym_ray.errors import BackendError


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
