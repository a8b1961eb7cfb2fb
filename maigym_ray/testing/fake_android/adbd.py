"""adbd over TCP for one fake device: the CNXN handshake (no AUTH), ``shell:`` and ``exec:`` streams with
one-write-in-flight flow control, several streams at once; and the device a stand-in container describes."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

# Relative imports only, and the standard library only: the stand-in container runs this package as
# ``python -S -m fake_android`` with nothing of maigym_ray around it (maigym_ray/testing/standin.py).
from .device import FakeAndroid
from .wire import (
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_VERSION_MIN,
    A_VERSION_SKIP_CHECKSUM,
    A_WRTE,
    MAX_PAYLOAD,
    ProtocolError,
    pack_message,
    read_message,
)


# -- adbd -----------------------------------------------------------------------------------------------------
class _Stream:
    def __init__(self, local_id: int, remote_id: int) -> None:
        self.local_id, self.remote_id = local_id, remote_id
        self.acked = asyncio.Event()
        self.acked.set()
        self.closed = False


class FakeAdbd:
    """adbd over TCP for one FakeAndroid: CNXN handshake, shell:/exec: streams, flow control."""

    def __init__(self, device: FakeAndroid, host: str = "127.0.0.1", port: int = 5555) -> None:
        self.device = device
        self.host, self.port = host, port
        self.banner = "device::" + "".join(
            f"{k}={device.props[k]};" for k in ("ro.product.name", "ro.product.model", "ro.product.device")
        )
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> int:
        """Starts listening; returns the port (an ephemeral one when port is 0)."""
        self._server = await asyncio.start_server(self._connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        streams: dict[int, _Stream] = {}
        tasks: set[asyncio.Task[None]] = set()
        state = {"version": A_VERSION_MIN, "max_payload": 4096, "next_id": 1}

        def send(command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
            writer.write(pack_message(command, arg0, arg1, data, state["version"] < A_VERSION_SKIP_CHECKSUM))

        try:
            while True:
                command, arg0, arg1, data = await read_message(
                    reader, verify=state["version"] < A_VERSION_SKIP_CHECKSUM
                )
                if command == A_CNXN:
                    state["version"] = min(arg0, A_VERSION_MIN)
                    state["max_payload"] = min(arg1, MAX_PAYLOAD)
                    send(A_CNXN, A_VERSION_MIN, MAX_PAYLOAD, self.banner.encode())
                elif command == A_OPEN:
                    service = data.rstrip(b"\x00").decode(errors="replace")
                    if service.startswith(("shell:", "exec:")):
                        local = state["next_id"]
                        state["next_id"] += 1
                        stream = streams[local] = _Stream(local, arg0)
                        send(A_OKAY, local, arg0)
                        task = asyncio.create_task(
                            self._serve(stream, service.split(":", 1)[1], send, state, writer)
                        )
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                    else:
                        send(A_CLSE, 0, arg0)  # the service does not exist here
                elif command == A_OKAY and arg1 in streams:
                    streams[arg1].acked.set()
                elif command == A_WRTE:
                    send(A_OKAY, arg1, arg0)  # stdin is accepted and ignored
                elif command == A_CLSE and arg1 in streams:
                    stream = streams.pop(arg1)
                    stream.closed = True
                    stream.acked.set()
                await writer.drain()
        except (ProtocolError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            for task in tasks:
                task.cancel()
            writer.close()

    async def _serve(self, stream: _Stream, command: str, send: Any, state: dict, writer: Any) -> None:
        output = self.device.run_shell(command)
        size = state["max_payload"]
        for start in range(0, len(output), size):
            await stream.acked.wait()
            if stream.closed:
                return
            stream.acked.clear()
            send(A_WRTE, stream.local_id, stream.remote_id, output[start : start + size])
            await writer.drain()
        await stream.acked.wait()
        if not stream.closed:
            stream.closed = True
            send(A_CLSE, stream.local_id, stream.remote_id)
            await writer.drain()


def parse_boot_args(argv: list[str]) -> dict[str, str]:
    """ReDroid-style boot arguments ``key=value`` as properties (androidboot.X becomes ro.boot.X)."""
    props = {}
    for arg in argv:
        if "=" in arg:
            key, value = arg.split("=", 1)
            props["ro.boot." + key[len("androidboot.") :] if key.startswith("androidboot.") else key] = value
    return props


def device_from_env(argv: list[str]) -> FakeAndroid:
    """The device a stand-in container describes with its boot arguments and environment."""
    props = parse_boot_args(argv)
    delay = os.environ.get("FAKE_BOOT_DELAY_S", "1")
    return FakeAndroid(
        width=int(props.get("ro.boot.redroid_width") or 720),
        height=int(props.get("ro.boot.redroid_height") or 1280),
        dpi=int(props.get("ro.boot.redroid_dpi") or 320),
        boot_delay_s=None if delay == "never" else float(delay),
        data_dir=os.environ.get("FAKE_DATA_DIR", "/data"),
        props=props,
    )


async def serve(argv: list[str]) -> None:
    """Runs the adbd a stand-in container describes (boot arguments, environment) until SIGTERM."""
    device = device_from_env(argv)
    port = int(os.environ.get("MAIGYM_ADB_PORT", "5555"))
    adbd = FakeAdbd(device, os.environ.get("FAKE_ADB_HOST", "127.0.0.1"), port)
    await adbd.start()
    print(f"fake adbd listening on {adbd.host}:{adbd.port} ({device.width}x{device.height})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # PID 1 in a container has no default handlers
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await adbd.stop()
