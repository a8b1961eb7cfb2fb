"""Rendezvous of a torch process group across Ray nodes: rank 0 hosts a TCPStore on its node's IP and a free
port, and publishes that address in Ray's GCS key-value table, where the other ranks read it.

torch's TCPStore listens on every interface even when it is given ``tcp://127.0.0.1`` (docs/platform-notes.md;
checked again with ``ss -ltnp``), and ``file://`` only works on one node. So rank 0 binds the listening socket
itself, on the address Ray gives its node (``ray.util.get_node_ip_address()``: 127.0.0.1 on a local Ray), and
hands it to the store (``master_listen_fd``): the store listens there and nowhere else.
"""

from __future__ import annotations

import socket
import time
from datetime import timedelta
from typing import Any

#: how often a waiting rank polls the GCS for rank 0's address, at most (starts at 1 ms and backs off).
_MAX_POLL_S = 0.05


def node_address() -> str:
    """The IP Ray knows this node by (127.0.0.1 on a local Ray)."""
    import ray

    return ray.util.get_node_ip_address()


def _key(name: str) -> bytes:
    return f"maigym-rendezvous/{name}".encode()


def host(name: str, world_size: int, timeout_s: float = 300.0) -> tuple[Any, str]:
    """Rank 0: a TCPStore listening on this node's IP only, its address published as ``name``; returns the
    store and "ip:port"."""
    import torch.distributed as dist
    from ray.experimental import internal_kv

    ip = node_address()
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((ip, 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    fd = sock.detach()  # the store owns the socket from here on (closing it under the store aborts it)
    store = dist.TCPStore(
        ip,
        port,
        world_size,
        True,
        timedelta(seconds=timeout_s),
        wait_for_workers=False,
        master_listen_fd=fd,
        use_libuv=False,  # the libuv server ignores master_listen_fd
    )
    address = f"{ip}:{port}"
    internal_kv._internal_kv_put(_key(name), address.encode(), overwrite=True)
    return store, address


def connect(name: str, world_size: int, timeout_s: float = 300.0) -> tuple[Any, str]:
    """Ranks > 0: waits for rank 0's address under ``name`` and connects to its store."""
    import torch.distributed as dist
    from ray.experimental import internal_kv

    deadline = time.monotonic() + timeout_s
    pause = 0.001
    while (raw := internal_kv._internal_kv_get(_key(name))) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"rendezvous {name!r}: rank 0 did not publish its address in {timeout_s:.0f} s"
            )
        time.sleep(pause)
        pause = min(_MAX_POLL_S, pause * 2)
    address = raw.decode()
    ip, port = address.rsplit(":", 1)
    store = dist.TCPStore(ip.strip("[]"), int(port), world_size, False, timedelta(seconds=timeout_s))
    return store, address


def store_for(name: str, rank: int, world_size: int, timeout_s: float = 300.0) -> tuple[Any, str]:
    """:func:`host` for rank 0, :func:`connect` for the others."""
    return host(name, world_size, timeout_s) if rank == 0 else connect(name, world_size, timeout_s)


def forget(name: str) -> None:
    """Removes the published address (after the group is torn down)."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_del(_key(name))
