"""The libvirt desktop provider: one VM per desktop, booted from its own qcow2 overlay and reset by snapshot revert.

Lifecycle:

- ``start``: create a qcow2 overlay on the base image (``qemu-img create -f qcow2 -F <fmt> -b base overlay``),
  define a domain with a unique name from the XML template, start it, find the guest's address (static, or
  libvirt's DHCP lease / guest agent / ARP view), wait until the guest agent answers with the bearer token, then
  take the clean snapshot once (with the VM's memory, so a revert lands on a booted desktop).
- ``reset``: revert to the clean snapshot and wait for the agent again.
- ``health``: the domain exists and is running.
- ``close``: destroy and undefine the domain (with its snapshots' metadata) and delete the overlay.

Every libvirt call blocks, so each runs in a thread (``asyncio.to_thread``). The provider keeps one connection
for its lifetime: it may be handed one (the caller then owns it), otherwise it opens ``uri`` and closes it on
``close``. With libvirt's test driver (``test:///default``) every connection has its own in-memory state, so
tests hand the provider the connection they inspect through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import string
import subprocess
import tempfile
import time
import uuid
from importlib import resources
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import aiohttp

from maigym_ray.envs.config import DesktopBackendConfig, LibvirtProviderConfig, check_choice
from maigym_ray.envs.desktop.provider import AgentEndpoint, DesktopProvider
from maigym_ray.errors import BackendError, ConfigError

try:
    import libvirt
except ImportError:  # pragma: no cover - libvirt-python is the "desktop" extra
    libvirt = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

ADDRESS_SOURCES = ("lease", "agent", "arp")
TEMPLATE_KEYS = ("name", "domain_type", "memory_mb", "vcpus", "disk_path", "mac", "network")


def _silence_libvirt_stderr() -> None:
    # libvirt prints every error to stderr besides raising it; the raised libvirtError carries the same text.
    if libvirt is not None:
        libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


_silence_libvirt_stderr()


def default_template_path() -> Path:
    """The packaged domain template (``maigym_ray/envs/desktop/domain.xml``)."""
    return Path(str(resources.files("maigym_ray.envs.desktop").joinpath("domain.xml")))


def random_mac() -> str:
    """A random MAC address in QEMU's locally administered prefix 52:54:00."""
    return "52:54:00:" + ":".join(f"{b:02x}" for b in secrets.token_bytes(3))


def render_template(template: str, values: dict[str, Any], source: str = "template") -> str:
    """Fills ``template``'s ``${key}`` placeholders with XML-escaped ``values``; BackendError on unknown keys."""
    try:
        return string.Template(template).substitute(
            {k: escape(str(v), {"'": "&apos;", '"': "&quot;"}) for k, v in values.items()}
        )
    except KeyError as e:
        raise BackendError(
            f"domain template {source}: unknown placeholder ${{{e.args[0]}}}; known: {', '.join(TEMPLATE_KEYS)}"
        ) from None
    except ValueError as e:
        raise BackendError(f"domain template {source}: {e} (write $$ for a literal $)") from None


class LibvirtProvider(DesktopProvider):
    """A desktop VM on libvirt whose guest agent the desktop backend talks to over HTTP."""

    def __init__(self, cfg: LibvirtProviderConfig | None = None, conn: Any = None) -> None:
        if libvirt is None:
            raise ConfigError("the libvirt provider needs libvirt-python: pip install 'maigym_ray[desktop]'")
        self.cfg = cfg or LibvirtProviderConfig()
        check_choice("libvirt.address_source", self.cfg.address_source, ADDRESS_SOURCES)
        if self.cfg.memory_mb < 1 or self.cfg.vcpus < 1:
            raise ConfigError(
                f"libvirt: memory_mb ({self.cfg.memory_mb}) and vcpus ({self.cfg.vcpus}) must be >= 1"
            )
        self.name = f"{self.cfg.name_prefix}-{uuid.uuid4().hex[:8]}"
        self.mac = random_mac()
        overlay_dir = Path(self.cfg.overlay_dir or Path(tempfile.gettempdir()) / "maigym-libvirt")
        self.overlay_path = overlay_dir / f"{self.name}.qcow2"
        self._conn = conn
        self._owns_conn = conn is None
        self._dom: Any = None
        self._endpoint: AgentEndpoint | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    # ------------------------------------------------------------------ public API

    @property
    def conn(self) -> Any:
        """The provider's libvirt connection (None before start when none was handed in)."""
        return self._conn

    @property
    def domain(self) -> Any:
        """The provider's libvirt domain (None before start and after close)."""
        return self._dom

    async def start(self) -> AgentEndpoint:
        async with self._lock:
            if self._closed:
                raise BackendError(f"libvirt domain {self.name}: start after close")
            if self._endpoint is not None:
                return self._endpoint
            try:
                await asyncio.to_thread(self._connect)
                await asyncio.to_thread(self._create_overlay)
                await asyncio.to_thread(self._define_and_boot)
                endpoint = await self._wait_ready(self.cfg.boot_timeout_s, "start")
                await asyncio.to_thread(self._ensure_snapshot)
            except BaseException:
                await asyncio.to_thread(self._teardown)
                raise
            self._endpoint = endpoint
            return endpoint

    async def reset(self) -> AgentEndpoint:
        if self._endpoint is None:
            return await self.start()
        async with self._lock:
            await asyncio.to_thread(self._revert)
            self._endpoint = await self._wait_ready(self.cfg.reset_timeout_s, "reset")
            return self._endpoint

    async def health(self) -> bool:
        try:
            return await asyncio.to_thread(self._running)
        except Exception:
            return False

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            self._endpoint = None
            try:
                await asyncio.to_thread(self._teardown)
            except Exception:  # pragma: no cover - _teardown already swallows everything
                log.exception("libvirt domain %s: close failed", self.name)

    # ------------------------------------------------------------------ blocking steps (run in threads)

    def _fail(self, step: str, err: BaseException | str) -> BackendError:
        return BackendError(f"libvirt domain {self.name} ({self.cfg.uri}): {step} failed: {err}")

    def _connect(self) -> None:
        if self._conn is not None:
            return
        try:
            self._conn = libvirt.open(self.cfg.uri)
        except libvirt.libvirtError as e:
            raise self._fail("connecting", e) from e

    def _create_overlay(self) -> None:
        base = self.cfg.base_image
        if not base:
            return  # test driver: no disk is ever read
        if not os.path.isfile(base):
            raise self._fail("creating the overlay", f"base image {base!r} does not exist")
        qemu_img = shutil.which(self.cfg.qemu_img)
        if qemu_img is None:
            raise self._fail("creating the overlay", f"{self.cfg.qemu_img!r} not found (install qemu-utils)")
        self.overlay_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [qemu_img, "create", "-f", "qcow2", "-F", self.cfg.base_format, "-b",
               os.path.abspath(base), str(self.overlay_path)]  # fmt: skip
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60)
        except subprocess.CalledProcessError as e:
            raise self._fail(
                "creating the overlay", f"{' '.join(cmd)}: {(e.stderr or e.stdout).strip()}"
            ) from e
        except (OSError, subprocess.TimeoutExpired) as e:
            raise self._fail("creating the overlay", e) from e

    def _render(self) -> str:
        path = Path(self.cfg.template_xml) if self.cfg.template_xml else default_template_path()
        try:
            template = path.read_text()
        except OSError as e:
            raise self._fail("reading the domain template", e) from e
        values = {
            "name": self.name,
            "domain_type": self.cfg.domain_type,
            "memory_mb": self.cfg.memory_mb,
            "vcpus": self.cfg.vcpus,
            "disk_path": str(self.overlay_path),
            "mac": self.mac,
            "network": self.cfg.network,
        }
        return render_template(template, values, source=str(path))

    def _define_and_boot(self) -> None:
        xml = self._render()
        try:
            self._dom = self._conn.defineXML(xml)
        except libvirt.libvirtError as e:
            template = self.cfg.template_xml or default_template_path()
            raise self._fail(f"defining the domain from template {template}", e) from e
        try:
            self._dom.create()
        except libvirt.libvirtError as e:
            raise self._fail("starting the domain", e) from e

    def _ensure_snapshot(self) -> None:
        try:
            if self.cfg.snapshot in self._dom.snapshotListNames():
                return
            xml = f"<domainsnapshot><name>{escape(self.cfg.snapshot)}</name></domainsnapshot>"
            self._dom.snapshotCreateXML(xml, 0)
        except libvirt.libvirtError as e:
            raise self._fail(f"creating snapshot {self.cfg.snapshot!r}", e) from e

    def _revert(self) -> None:
        try:
            snap = self._dom.snapshotLookupByName(self.cfg.snapshot)
            self._dom.revertToSnapshot(snap, libvirt.VIR_DOMAIN_SNAPSHOT_REVERT_RUNNING)
        except libvirt.libvirtError as e:
            raise self._fail(f"reverting to snapshot {self.cfg.snapshot!r}", e) from e

    def _running(self) -> bool:
        if self._conn is None or self._dom is None:
            return False
        try:
            dom = self._conn.lookupByName(self.name)
            state, _reason = dom.state()
        except libvirt.libvirtError:
            return False
        return state == libvirt.VIR_DOMAIN_RUNNING

    def _guest_address(self) -> str | None:
        """The guest's first IPv4 address on the provider's NIC (by MAC), or None while it has none."""
        source = {
            "lease": libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE,
            "agent": libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT,
            "arp": libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_ARP,
        }[self.cfg.address_source]
        try:
            ifaces = self._dom.interfaceAddresses(source, 0) or {}
        except libvirt.libvirtError as e:
            if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                raise self._fail("looking up the guest address", e) from e
            return None  # e.g. the guest agent is not up yet
        ordered = sorted(ifaces.values(), key=lambda i: (i.get("hwaddr") or "").lower() != self.mac)
        for iface in ordered:
            for addr in iface.get("addrs") or []:
                if addr.get("type") == libvirt.VIR_IP_ADDR_TYPE_IPV4 and addr.get("addr"):
                    return addr["addr"]
        return None

    def _token(self) -> str:
        if self.cfg.token:
            return self.cfg.token
        if self.cfg.token_file:
            try:
                token = Path(self.cfg.token_file).read_text().strip()
            except OSError as e:
                raise self._fail("reading the agent token", e) from e
            if token:
                return token
            raise self._fail("reading the agent token", f"token_file {self.cfg.token_file!r} is empty")
        raise self._fail("reading the agent token", "set libvirt.token or libvirt.token_file")

    def _teardown(self) -> None:
        """Destroys and undefines the domain, deletes the overlay and closes an owned connection (never raises)."""
        dom, self._dom = self._dom, None
        if dom is not None:
            with contextlib.suppress(Exception):
                if dom.isActive():
                    dom.destroy()
            try:
                flags = libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
                try:
                    dom.undefineFlags(flags | libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
                except libvirt.libvirtError as e:
                    if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                        raise
                    dom.undefineFlags(flags)  # drivers without NVRAM support reject that flag
            except Exception as e:
                if not (
                    isinstance(e, libvirt.libvirtError) and e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN
                ):
                    log.warning("libvirt domain %s: undefine failed: %s", self.name, e)
        try:
            self.overlay_path.unlink(missing_ok=True)
        except OSError as e:
            log.warning("libvirt domain %s: deleting overlay %s failed: %s", self.name, self.overlay_path, e)
        if self._owns_conn and self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(Exception):
                conn.close()

    # ------------------------------------------------------------------ waiting for the guest

    async def _wait_ready(self, timeout_s: float, step: str) -> AgentEndpoint:
        """Resolves the agent's address and, unless wait_for_agent is off, waits until it answers 200."""
        token = await asyncio.to_thread(self._token)
        deadline = time.monotonic() + timeout_s
        address = self.cfg.agent_address
        while not address:
            address = await asyncio.to_thread(self._guest_address)
            if address:
                break
            if time.monotonic() >= deadline:
                raise self._fail(
                    f"{step}: finding the guest address",
                    f"no IPv4 address from source {self.cfg.address_source!r} after {timeout_s:.0f} s "
                    f"(MAC {self.mac}, network {self.cfg.network!r})",
                )
            await asyncio.sleep(self.cfg.poll_interval_s)
        host = f"[{address}]" if ":" in address else address
        endpoint = AgentEndpoint(url=f"http://{host}:{self.cfg.agent_port}", token=token)
        if self.cfg.wait_for_agent:
            await self._wait_agent(endpoint, deadline, timeout_s, step)
        return endpoint

    async def _wait_agent(
        self, endpoint: AgentEndpoint, deadline: float, timeout_s: float, step: str
    ) -> None:
        url = endpoint.url + self.cfg.agent_health_path
        headers = {"Authorization": f"Bearer {endpoint.token}"}
        last = "no answer"
        async with aiohttp.ClientSession() as session:
            while True:
                if not await self.health():
                    raise self._fail(f"{step}: waiting for the guest agent", "the domain is not running")
                remaining = deadline - time.monotonic()
                try:
                    timeout = aiohttp.ClientTimeout(total=max(0.5, min(5.0, remaining)))
                    async with session.get(url, headers=headers, timeout=timeout) as resp:
                        if resp.status == 200:
                            return
                        if resp.status in (401, 403):
                            raise self._fail(
                                f"{step}: waiting for the guest agent",
                                f"GET {url} answered {resp.status}: the agent rejects the configured token",
                            )
                        last = f"HTTP {resp.status}"
                except (TimeoutError, aiohttp.ClientError, OSError) as e:
                    last = f"{type(e).__name__}: {e}"
                if time.monotonic() >= deadline:
                    raise self._fail(
                        f"{step}: waiting for the guest agent",
                        f"GET {url} did not answer 200 within {timeout_s:.0f} s (last: {last})",
                    )
                await asyncio.sleep(self.cfg.poll_interval_s)


def from_desktop(cfg: DesktopBackendConfig) -> LibvirtProvider:
    """The ``libvirt`` desktop provider kind's builder: a VM with the desktop settings' libvirt section."""
    return LibvirtProvider(cfg.libvirt)
