"""A local run listens on loopback only: Ray, the app servers, Chromium, every process it starts."""

from __future__ import annotations

import ipaddress
import os

import psutil
import pytest

from maigym_ray.config import EnvManagerConfig, PoolConfig
from maigym_ray.tasks.pool import TaskPool

pytestmark = pytest.mark.integration


def listening_sockets_of_our_tree() -> list[tuple[str, str, int]]:
    ours = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    out = []
    for c in psutil.net_connections(kind="inet"):
        if c.status == psutil.CONN_LISTEN and c.pid in ours:
            try:
                name = psutil.Process(c.pid).name()
            except psutil.Error:
                name = "?"
            out.append((name, c.laddr.ip, c.laddr.port))
    return out


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)  # "::ffff:127.0.0.1" is IPv4 loopback seen through IPv6
    return (mapped or addr).is_loopback


def test_is_loopback_helper():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("::ffff:127.0.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("192.0.2.2")


def test_every_listener_is_loopback(ray_local):
    from maigym_ray.envs.manager import EnvManager

    cfg = EnvManagerConfig(pools={"web": PoolConfig(target_size=2, max_size=2)})
    m = ray_local.remote(EnvManager).options(num_cpus=0, max_concurrency=100).remote(cfg, TaskPool.builtin())
    try:
        ray_local.get(m.start.remote(wait=True), timeout=120)
        (lease,) = ray_local.get(m.request.remote(1, "web"))
        ray_local.get(m.reset.remote(lease, "mail-archive-invoice"))
        socks = listening_sockets_of_our_tree()
        names = {n for n, _, _ in socks}
        assert any("raylet" in n or "gcs" in n for n in names), socks  # Ray's own servers were found
        assert any("NodeServices" in n for n in names), socks  # and the app servers
        public = [s for s in socks if not is_loopback(s[1])]
        assert public == [], f"listening beyond loopback: {public}"
    finally:
        ray_local.get(m.shutdown.remote(), timeout=60)
        ray_local.kill(m)


def test_weight_group_listens_on_loopback_only(ray_local):
    """The weight group's rendezvous store (rank 0) and gloo's pairs bind the node IP Ray gives, 127.0.0.1 on
    a local Ray, not every interface as torch's TCPStore does by itself (docs/platform-notes.md)."""
    import torch

    from maigym_ray.runtime.placement import Placement
    from maigym_ray.runtime.topology import TopologyConfig
    from maigym_ray.weights import group as wg

    opts = Placement(TopologyConfig()).trainer_rank(0)
    named = [("w", torch.arange(1000, dtype=torch.float32))]
    sender = ray_local.remote(wg.WeightSender).options(**opts).remote(named)
    receiver = ray_local.remote(wg.WeightReceiverActor).options(**opts).remote()
    try:
        joined = ray_local.get(
            [sender.join.remote(2, "loopback-check"), receiver.join.remote(2, 1, "loopback-check")],
            timeout=60,
        )
        assert all(j["address"] == "127.0.0.1" and j["rendezvous"].startswith("127.0.0.1:") for j in joined)
        layout = wg.layout(named, 1 << 20)
        got = receiver.receive.remote(layout, "loopback-check")
        ray_local.get(sender.send.remote(layout, "loopback-check"), timeout=60)
        _, tensors = ray_local.get(got, timeout=60)
        assert torch.equal(tensors["w"], named[0][1])
        socks = listening_sockets_of_our_tree()
        port = int(joined[0]["rendezvous"].rsplit(":", 1)[1])
        assert any(p == port for _, _, p in socks), socks  # the store's listener was found
        public = [s for s in socks if not is_loopback(s[1])]
        assert public == [], f"listening beyond loopback: {public}"
    finally:
        ray_local.get([sender.leave.remote("loopback-check"), receiver.leave.remote("loopback-check")])
        ray_local.kill(sender)
        ray_local.kill(receiver)
