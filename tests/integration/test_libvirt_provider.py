"""The libvirt desktop provider on the real libvirt API, with libvirt's in-memory test driver (``test:///default``).

Every ``libvirt.open("test:///default")`` gets its own fresh state, so each test opens one connection, hands it to
the provider and inspects the domains through it. ``qemu-img`` is replaced by a script that records its arguments
and creates the overlay file, and the guest agent by a tiny aiohttp server on loopback (a static agent address).
The ``libvirt``-marked test at the end runs the whole flow on a real host with a real guest image.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from maigym_ray.config import LibvirtProviderConfig
from maigym_ray.envs.desktop.libvirt_provider import LibvirtProvider, default_template_path
from maigym_ray.errors import BackendError
from maigym_ray.testing.loopback_http import loopback_http

libvirt = pytest.importorskip("libvirt")

pytestmark = pytest.mark.integration


@pytest.fixture
def conn():
    c = libvirt.open("test:///default")
    yield c
    c.close()


@pytest.fixture
def fake_qemu_img(tmp_path: Path) -> Path:
    """A qemu-img stand-in: appends its argv to calls.txt and creates the overlay (its last argument)."""
    script = tmp_path / "qemu-img"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls.txt\ntouch "$(eval echo \\${{$#}})"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def base_image(tmp_path: Path) -> Path:
    base = tmp_path / "base.qcow2"
    base.write_bytes(b"QFI\xfb")
    return base


def _cfg(tmp_path: Path, **kw) -> LibvirtProviderConfig:
    values = dict(
        uri="test:///default",
        domain_type="test",
        overlay_dir=str(tmp_path / "overlays"),
        memory_mb=512,
        vcpus=1,
        token="secret-token",
        wait_for_agent=False,
        boot_timeout_s=5.0,
        reset_timeout_s=5.0,
        poll_interval_s=0.05,
    )
    values.update(kw)
    return LibvirtProviderConfig(**values)


def _names(conn) -> set[str]:
    return {d.name() for d in conn.listAllDomains()}


async def test_start_reset_health_close(conn, tmp_path, fake_qemu_img, base_image):
    p = LibvirtProvider(_cfg(tmp_path, base_image=str(base_image), qemu_img=str(fake_qemu_img)), conn=conn)
    ep = await p.start()
    # the overlay: qemu-img got the qcow2 backing-file command line, the file exists under overlay_dir
    assert p.overlay_path.parent == tmp_path / "overlays"
    assert p.overlay_path.is_file()
    assert (tmp_path / "calls.txt").read_text().split() == [
        "create", "-f", "qcow2", "-F", "qcow2", "-b", str(base_image), str(p.overlay_path),
    ]  # fmt: skip
    # the domain: defined from the template, running, with the overlay disk, memory, vcpus and MAC
    assert p.name in _names(conn) and p.name.startswith("maigym-desktop-")
    dom = conn.lookupByName(p.name)
    assert dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING
    root = ET.fromstring(dom.XMLDesc())
    assert root.find("devices/disk/source").get("file") == str(p.overlay_path)
    assert int(root.find("memory").text) == 512 * 1024  # KiB
    assert int(root.find("vcpu").text) == 1
    assert root.find("devices/interface/mac").get("address") == p.mac
    # the clean snapshot, and an endpoint at the leased address with the configured token
    assert dom.snapshotListNames() == ["clean"]
    assert ep.token == "secret-token"
    assert ep.url.startswith("http://192.168.122.") and ep.url.endswith(":8765")
    assert await p.start() == ep  # idempotent
    assert await p.health()

    # mutate: pause the VM and shrink its memory; reset reverts both
    dom.suspend()
    dom.setMemory(256 * 1024)
    assert dom.state()[0] == libvirt.VIR_DOMAIN_PAUSED
    assert not await p.health()
    ep2 = await p.reset()
    assert ep2.token == "secret-token"
    assert dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING
    assert dom.info()[2] == 512 * 1024  # current memory, KiB
    assert await p.health()
    assert dom.snapshotListNames() == ["clean"]  # reset never takes another snapshot

    # destroyed behind the provider's back: unhealthy, and reset brings it back from the snapshot
    dom.destroy()
    assert not await p.health()
    await p.reset()
    assert await p.health()

    await p.close()
    assert p.name not in _names(conn)
    assert not p.overlay_path.exists()
    assert not await p.health()
    await p.close()  # idempotent
    with pytest.raises(BackendError, match="after close"):
        await p.start()


@pytest.mark.skipif(
    shutil.which("qemu-img") is None, reason="qemu-img is not installed (apt-get install qemu-utils)"
)
async def test_real_qemu_img_overlay(conn, tmp_path):
    base = tmp_path / "base.qcow2"
    subprocess.run(["qemu-img", "create", "-f", "qcow2", str(base), "64M"], check=True, capture_output=True)
    p = LibvirtProvider(_cfg(tmp_path, base_image=str(base)), conn=conn)
    await p.start()
    info = json.loads(
        subprocess.run(
            ["qemu-img", "info", "--output=json", str(p.overlay_path)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    assert info["format"] == "qcow2"
    assert info["backing-filename"] == str(base)
    assert info.get("backing-filename-format", "qcow2") == "qcow2"
    assert info["virtual-size"] == 64 * 1024 * 1024
    await p.close()
    assert not p.overlay_path.exists() and base.is_file()


async def test_two_providers_get_distinct_domains(conn, tmp_path):
    a = LibvirtProvider(_cfg(tmp_path), conn=conn)
    b = LibvirtProvider(_cfg(tmp_path), conn=conn)
    await a.start()
    await b.start()
    assert a.name != b.name and a.mac != b.mac and a.overlay_path != b.overlay_path
    assert {a.name, b.name} <= _names(conn)
    await a.close()
    assert a.name not in _names(conn) and b.name in _names(conn)
    assert await b.health()
    await b.close()


async def test_without_base_image_no_overlay_is_created(conn, tmp_path):
    p = LibvirtProvider(_cfg(tmp_path), conn=conn)
    await p.start()
    assert not p.overlay_path.exists()
    assert await p.health()
    await p.close()
    assert p.name not in _names(conn)


async def test_bad_template_is_a_clear_backend_error(conn, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<domain type='${domain_type}'><name>${name}</name><memory>")  # truncated XML
    p = LibvirtProvider(_cfg(tmp_path, template_xml=str(bad)), conn=conn)
    with pytest.raises(BackendError) as e:
        await p.start()
    msg = str(e.value)
    assert p.name in msg and "defining the domain from template" in msg and str(bad) in msg
    assert p.name not in _names(conn)

    unknown = tmp_path / "unknown.xml"
    unknown.write_text(default_template_path().read_text().replace("${vcpus}", "${cpus}"))
    p2 = LibvirtProvider(_cfg(tmp_path, template_xml=str(unknown)), conn=conn)
    with pytest.raises(BackendError, match=r"unknown placeholder \$\{cpus\}"):
        await p2.start()

    p3 = LibvirtProvider(_cfg(tmp_path, template_xml=str(tmp_path / "missing.xml")), conn=conn)
    with pytest.raises(BackendError, match="reading the domain template"):
        await p3.start()


async def test_overlay_failures(conn, tmp_path, base_image):
    p = LibvirtProvider(_cfg(tmp_path, base_image=str(tmp_path / "nope.qcow2")), conn=conn)
    with pytest.raises(BackendError, match=r"base image .* does not exist"):
        await p.start()
    p = LibvirtProvider(_cfg(tmp_path, base_image=str(base_image), qemu_img="no-such-qemu-img"), conn=conn)
    with pytest.raises(BackendError, match="not found"):
        await p.start()
    assert _names(conn) == {"test"}  # the test driver's own domain only: nothing was left defined


async def test_token_sources(conn, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    p = LibvirtProvider(_cfg(tmp_path, token="", token_file=str(token_file)), conn=conn)
    assert (await p.start()).token == "from-file"
    await p.close()
    p = LibvirtProvider(_cfg(tmp_path, token=""), conn=conn)
    with pytest.raises(BackendError, match="token"):
        await p.start()
    assert p.name not in _names(conn)  # a failed start tears the domain down


@pytest.fixture
async def fake_agent():
    """A guest-agent stand-in on loopback: /health answers 200 to the right bearer token, 401 otherwise."""
    state = {"ready_after": 0, "calls": 0}

    async def health(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer secret-token":
            return web.Response(status=401)
        state["calls"] += 1
        if state["calls"] <= state["ready_after"]:
            return web.Response(status=503)
        return web.json_response({"ok": True})

    async with loopback_http(web.get("/health", health)) as port:
        yield port, state


async def test_waits_for_the_agent(conn, tmp_path, fake_agent):
    port, state = fake_agent
    state["ready_after"] = 3  # the agent answers 503 three times, then 200
    cfg = _cfg(tmp_path, wait_for_agent=True, agent_address="127.0.0.1", agent_port=port)
    p = LibvirtProvider(cfg, conn=conn)
    ep = await p.start()
    assert ep.url == f"http://127.0.0.1:{port}"
    assert state["calls"] == 4
    await p.reset()
    assert state["calls"] == 5
    await p.close()

    bad = LibvirtProvider(_cfg(tmp_path, wait_for_agent=True, agent_address="127.0.0.1", agent_port=port,
                               token="wrong"), conn=conn)  # fmt: skip
    with pytest.raises(BackendError, match="rejects the configured token"):
        await bad.start()
    assert bad.name not in _names(conn)


async def test_agent_timeout_is_a_backend_error(conn, tmp_path, unused_tcp_port):
    cfg = _cfg(tmp_path, wait_for_agent=True, agent_address="127.0.0.1", agent_port=unused_tcp_port,
               boot_timeout_s=0.5)  # fmt: skip
    p = LibvirtProvider(cfg, conn=conn)
    with pytest.raises(BackendError, match=r"start: waiting for the guest agent.*did not answer 200"):
        await p.start()
    assert p.name not in _names(conn)


def _real_host() -> str:
    missing = [v for v in ("MAIGYM_LIBVIRT_URI", "MAIGYM_LIBVIRT_BASE_IMAGE") if not os.environ.get(v)]
    if missing:
        return (
            f"needs a real libvirt host with a guest image running the maigym agent: set {', '.join(missing)} "
            "(and MAIGYM_LIBVIRT_TOKEN or MAIGYM_LIBVIRT_TOKEN_FILE; optionally MAIGYM_LIBVIRT_TEMPLATE, "
            "MAIGYM_LIBVIRT_OVERLAY_DIR, MAIGYM_LIBVIRT_DOMAIN_TYPE)"
        )
    return ""


@pytest.mark.libvirt
@pytest.mark.skipif(bool(_real_host()), reason=_real_host() or "real host configured")
async def test_real_host_full_flow():
    env = os.environ
    cfg = LibvirtProviderConfig(
        uri=env["MAIGYM_LIBVIRT_URI"],
        base_image=env["MAIGYM_LIBVIRT_BASE_IMAGE"],
        template_xml=env.get("MAIGYM_LIBVIRT_TEMPLATE", ""),
        overlay_dir=env.get("MAIGYM_LIBVIRT_OVERLAY_DIR", ""),
        domain_type=env.get("MAIGYM_LIBVIRT_DOMAIN_TYPE", "kvm"),
        token=env.get("MAIGYM_LIBVIRT_TOKEN", ""),
        token_file=env.get("MAIGYM_LIBVIRT_TOKEN_FILE", ""),
        wait_for_agent=True,
    )
    p = LibvirtProvider(cfg)
    try:
        ep = await p.start()
        assert await p.health()
        assert p.overlay_path.is_file()
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ep.token}"}) as s:
            async with s.get(ep.url + cfg.agent_health_path) as r:
                assert r.status == 200
            async with s.get(ep.url + cfg.agent_health_path, headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401
            ep2 = await p.reset()
            async with s.get(ep2.url + cfg.agent_health_path) as r:
                assert r.status == 200
        assert await p.health()
        name = p.name
    finally:
        await p.close()
    assert not p.overlay_path.exists()
    check = libvirt.open(cfg.uri)
    try:
        assert name not in {d.name() for d in check.listAllDomains()}
    finally:
        check.close()
