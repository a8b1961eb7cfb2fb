"""Config schema of the environment layer: backends, pools, the env manager and its sharding.

Plain dataclasses that Hydra composes (as ``env`` in every run config, see :mod:`maigym_ray.config`) and the
env layer builds objects from. They live beside the envs so that the env layer depends on nothing above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maigym_ray.errors import ConfigError

#: how the instances of a pool whose kind drives Chromium get their browser (WebBackendConfig.browser).
BROWSER_MODES = ("shared", "per_env")


@dataclass
class WebBackendConfig:
    """Playwright + Chromium backend settings: a ``web`` or ``miniwob`` pool's ``options``."""

    #: "web" (desktop viewport, pointer) or "mobile_web" (phone viewport, touch emulation); "" = the pool's
    #: platform (PoolConfig.platform), which it must match when given.
    platform: str = ""
    #: viewport in CSS pixels; 0 means the platform default (1024x768 web, 390x844 mobile_web).
    width: int = 0
    height: int = 0
    #: "shared": one Chromium per node, a browser context per env; "per_env": one Chromium per env actor.
    browser: str = "shared"
    #: how reset clears the browser: "context" (a fresh browser context: new cookies, storage, history and
    #: renderer; bounded memory), "reload" (clear cookies, reload, wipe history: ~60 ms faster) or "restart"
    #: (suite pages that restart their own episodes, MiniWoB++, start the next episode of the same task in the
    #: loaded page as the suite's own environment does, reloading every 50 episodes and on a change of task;
    #: anything else reloads).
    reset: str = "context"
    #: Chromium binary; "" finds Debian's real binary (never downloads a browser).
    executable: str = ""
    #: the longest a navigation may take to load before the step fails as an infrastructure error.
    settle_timeout_s: float = 10.0
    #: include a PNG screenshot in every observation.
    screenshot: bool = True
    #: the longest `wait(seconds=...)` honoured.
    wait_cap_s: float = 5.0
    #: MiniWoB++ pools only (the suite's pages keep no cookies or storage): the instances of one env actor group
    #: (PoolConfig.instances_per_actor) open their pages in one browser context, which Chromium serves with one
    #: renderer process: less memory, and the group's pages share a fate as its instances already do. Needs a
    #: reset other than "context".
    share_context: bool = False


@dataclass
class LibvirtProviderConfig:
    """The libvirt desktop provider: a VM from a qcow2 overlay, reset by reverting a clean snapshot."""

    #: libvirt connection URI ("qemu:///system"; "test:///default" is libvirt's in-memory test driver).
    uri: str = "qemu:///system"
    #: domain XML template (string.Template placeholders ${name}, ${domain_type}, ${memory_mb}, ${vcpus},
    #: ${disk_path}, ${mac}, ${network}); "" uses the packaged envs/desktop/domain.xml.
    template_xml: str = ""
    #: the domain type written into the template: "kvm", "qemu" (no KVM) or "test" (the test driver).
    domain_type: str = "kvm"
    #: domain names are "<name_prefix>-<8 hex digits>", unique per provider.
    name_prefix: str = "maigym-desktop"
    #: the qcow2 base image (with the guest agent and its token installed); every VM boots from its own
    #: overlay on it. "" skips the overlay (test driver only: the disk path then names a file never created).
    base_image: str = ""
    #: format of the base image, passed to qemu-img as -F.
    base_format: str = "qcow2"
    #: folder of the per-VM overlays (the qemu user must be able to read it); "" = <tmp>/maigym-libvirt.
    overlay_dir: str = ""
    #: the qemu-img binary that creates overlays.
    qemu_img: str = "qemu-img"
    #: guest memory in MiB and virtual CPUs.
    memory_mb: int = 4096
    vcpus: int = 2
    #: the libvirt network the guest's NIC joins.
    network: str = "default"
    #: name of the snapshot taken once the agent first answers; reset reverts to it.
    snapshot: str = "clean"
    #: the TCP port the guest agent listens on inside the guest.
    agent_port: int = 8765
    #: the agent's host or IP address when it is static; "" asks libvirt for the guest's address.
    agent_address: str = ""
    #: where libvirt finds the guest's address when agent_address is "": "lease" (the network's DHCP
    #: leases), "agent" (qemu-guest-agent) or "arp" (the host's ARP table).
    address_source: str = "lease"
    #: the agent's bearer token; "" reads token_file.
    token: str = ""
    #: a host file holding the token that was put into the guest image (used when token is "").
    token_file: str = ""
    #: path the agent answers 200 on once it is ready (GET with the bearer token).
    agent_health_path: str = "/health"
    #: wait for the agent to answer before start/reset return (false for the test driver, which runs no guest).
    wait_for_agent: bool = True
    #: the longest start waits for the guest address and the agent after booting, and reset after reverting.
    boot_timeout_s: float = 180.0
    reset_timeout_s: float = 60.0
    #: seconds between polls of the address and the agent.
    poll_interval_s: float = 1.0


@dataclass
class DesktopBackendConfig:
    """The desktop backend: a desktop (X display or VM) driven through the guest agent inside it (a ``desktop``
    or ``osworld`` pool's ``options``)."""

    #: "xvfb" (an X display on this node: tests and debugging) or "libvirt" (a VM with the agent in the guest).
    provider: str = "xvfb"
    #: screen size in pixels.
    width: int = 1280
    height: int = 800
    #: include a PNG screenshot in every observation.
    screenshot: bool = True
    #: a folder copied into the desktop's home on every reset (xvfb); "" = an empty home.
    home_template: str = ""
    #: the headful Chromium binary inside the desktop (xvfb); "" finds Debian's real binary.
    chromium: str = ""
    #: keep the session Chromium across resets and wipe it (tabs, cookies, cache, storage, history) instead of
    #: relaunching it: about 0.1 s instead of about 1 s per reset.
    keep_browser: bool = True
    #: the longest bringing a desktop up may take (display, window manager, agent, browser).
    start_timeout_s: float = 60.0
    #: the longest one call to the guest agent may take.
    agent_timeout_s: float = 30.0
    #: the longest a page may take to load after an action before the step fails as an infrastructure error.
    settle_timeout_s: float = 10.0
    #: the longest `wait(seconds=...)` honoured.
    wait_cap_s: float = 5.0
    #: offer the agent a terminal (a shell in the desktop). Off unless turned on: a shell is a way out of the
    #: task, so when on it runs as ``terminal_user``, never as the env actor's user, in its own session.
    terminal: bool = False
    #: the unprivileged user the terminal runs as (it must exist; the agent must run as root to switch).
    terminal_user: str = "nobody"
    #: text files under home larger than this are left out of state()["desktop"]["files"].
    state_max_file_bytes: int = 65536
    #: the libvirt provider's settings (provider == "libvirt").
    libvirt: LibvirtProviderConfig = field(default_factory=LibvirtProviderConfig)


@dataclass
class AndroidBackendConfig:
    """ReDroid containers (docker SDK) driven over adb, an ``android`` pool's ``options``: see
    envs/backends/android.py."""

    #: the ReDroid image (e.g. "redroid/redroid:13.0.0-latest"); tests use a local stand-in image.
    image: str = "redroid/redroid:13.0.0-latest"
    #: docker daemon URL (e.g. "unix:///var/run/docker.sock"); "" reads DOCKER_HOST like the docker CLI.
    docker_url: str = ""
    #: screen size in pixels and density, passed as androidboot.redroid_width/height/dpi; 0 = image default.
    width: int = 720
    height: int = 1280
    dpi: int = 320
    #: frames per second (androidboot.redroid_fps); 0 = image default.
    fps: int = 0
    #: androidboot.redroid_gpu_mode: "guest" (software rendering), "host" (the host GPU; needs devices) or
    #: "auto".
    gpu_mode: str = "guest"
    #: run the container privileged (ReDroid needs it; off only for the stand-in on hosts whose root lacks
    #: capabilities that --privileged grants).
    privileged: bool = True
    #: host devices handed to the container, e.g. ["/dev/dri/renderD128:/dev/dri/renderD128:rwm"].
    devices: list[str] = field(default_factory=list)
    #: container memory limit in docker's notation ("4g"); "" = no limit.
    memory: str = ""
    #: further boot arguments appended to the container command (e.g. "ro.product.model=Pixel").
    extra_args: list[str] = field(default_factory=list)
    #: extra environment variables and bind mounts ("host:container[:ro]") of the container.
    env: dict[str, str] = field(default_factory=dict)
    volumes: list[str] = field(default_factory=list)
    #: container names are "<name_prefix>-<8 hex digits>", unique per backend.
    name_prefix: str = "maigym-android"
    #: docker network mode: "bridge" publishes adbd's port 5555 on adb_host:adb_port; "host" shares the host's
    #: network (adbd then listens on adb_port itself; the container gets it as MAIGYM_ADB_PORT, which the
    #: stand-in honours; ReDroid's adbd listens on 5555, so set adb_port=5555: one ReDroid per host).
    network: str = "host"
    #: address and port adb connects to; port 0 = a free port chosen per container.
    adb_host: str = "127.0.0.1"
    adb_port: int = 0
    #: the adb client binary and the port of the adb server it talks to (the server binds loopback).
    adb_path: str = "adb"
    adb_server_port: int = 5037
    #: the longest one adb command may take before it fails as an infrastructure error.
    adb_timeout_s: float = 30.0
    #: host folder of the per-instance /data overlays (<data_root>/<container name>); "" = a docker volume
    #: per container. Each container starts on a fresh overlay.
    data_root: str = ""
    #: a host folder copied into each fresh /data overlay (a prepared /data); needs data_root. "" = empty.
    data_template: str = ""
    #: how reset restores the device: "recreate" (a new container on a fresh /data overlay) or "pm_clear"
    #: (`pm clear` of clear_packages, then back to the home screen: much faster). The mocked apps' state is
    #: restored server-side in both cases.
    reset: str = "pm_clear"
    #: packages cleared by reset "pm_clear" (the browser, the apps under test).
    clear_packages: list[str] = field(default_factory=lambda: ["org.chromium.webview_shell"])
    #: recreate the container after this many episodes (long-lived Android instances degrade); 0 = never.
    recycle_after: int = 20
    #: the longest a container may take until `getprop sys.boot_completed` answers 1.
    boot_timeout_s: float = 120.0
    #: seconds between boot checks.
    boot_poll_s: float = 1.0
    #: open_app names -> activity components started with `am start -n` (e.g. {"settings":
    #: "com.android.settings/.Settings"}). Mocked apps not listed here open in the browser.
    app_components: dict[str, str] = field(default_factory=dict)
    #: the browser activity that opens mocked apps' URLs (android.intent.action.VIEW); "" = the default one.
    browser_component: str = "org.chromium.webview_shell/.WebViewBrowserActivity"
    #: the address the device reaches the mocked apps at (loopback with host networking; the docker bridge's
    #: gateway, e.g. 172.17.0.1, with bridge networking: then bind the apps there with env.app_bind).
    apps_address: str = "127.0.0.1"
    #: include a PNG screenshot in every observation.
    screenshot: bool = True
    #: where `uiautomator dump` writes the UI hierarchy on the device.
    dump_path: str = "/sdcard/maigym_ui.xml"
    #: the longest `wait(seconds=...)` honoured; the pause after each action for the screen to settle.
    wait_cap_s: float = 5.0
    settle_s: float = 0.3
    #: press duration of long_press (when the action gives none) and of drag, in ms.
    long_press_ms: int = 800


@dataclass
class PoolConfig:
    """One warm pool of identical instances (one backend kind on one platform)."""

    #: the platform the pool serves: web, mobile_web, android or desktop.
    platform: str = "web"
    #: backend kind: web, android, desktop, miniwob (MiniWoB++ pages in Chromium; uses the web settings),
    #: osworld (OSWorld-format tasks on the desktop; uses the desktop settings), a kind a package adds through
    #: the entry-point group maigym_ray.backends (envs/registry.py), or a user builder's "module.path:function"
    #: (docs/plugins/backends.md).
    backend: str = "web"
    #: instances kept started and idle ahead of demand.
    target_size: int = 2
    #: the most instances the pool may hold (busy + idle + starting).
    max_size: int = 8
    #: replace an instance after this many episodes (long-lived devices degrade); 0 = never.
    recycle_after: int = 50
    #: CPUs reserved per env actor (0 lets many async actors share a core).
    num_cpus: float = 0.0
    #: instances hosted by one env actor process (envs/group.py). 1: an actor each (a crash takes one
    #: instance). More saves a Ray worker (~50 MB) per instance where the device lives elsewhere (pages of the
    #: node's shared Chromium), at the cost of a shared fate; the group reserves what one actor would.
    instances_per_actor: int = 1
    #: environment variables of the env actor processes. Two malloc arenas keep each actor's heap compact:
    #: glibc's default of 8 per core mostly holds freed screenshot buffers.
    env_vars: dict[str, str] = field(default_factory=lambda: {"MALLOC_ARENA_MAX": "2"})
    #: the settings of the pool's backend kind, read into that kind's own settings class when the pool is
    #: checked and built (envs/registry.kind_options), so an unknown key or a wrong type is a ConfigError naming
    #: its key path. The package's kinds: web and miniwob take WebBackendConfig, android AndroidBackendConfig,
    #: desktop and osworld DesktopBackendConfig; a plug-in kind brings its own (``BackendKind.options``).
    #: Empty: the kind's defaults.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class EnvManagerConfig:
    """The environment manager: pools, apps, timeouts and health checks."""

    #: the pools to run, keyed by a pool name; tasks are routed to a pool of their platform.
    pools: dict[str, PoolConfig] = field(default_factory=lambda: {"web": PoolConfig()})
    #: mocked apps every instance hosts; ["all"] hosts every registered app; a "module:Class" entry adds a
    #: user's App subclass (docs/plugins/apps.md).
    apps: list[str] = field(default_factory=lambda: ["all"])
    #: address the app servers bind to (loopback; a bridge address for containers and VMs).
    app_bind: str = "127.0.0.1"
    #: per-operation time limits in seconds.
    start_timeout_s: float = 60.0
    reset_timeout_s: float = 20.0
    step_timeout_s: float = 20.0
    observe_timeout_s: float = 10.0
    evaluate_timeout_s: float = 10.0
    #: how long `request` waits for free instances before failing as EnvUnavailableError.
    request_timeout_s: float = 120.0
    #: seconds between health checks of idle instances.
    health_interval_s: float = 5.0
    #: idle instances health-checked per pool per round, in rotation (0 = every idle instance every round;
    #: at thousands of instances a bound keeps one round's fan-out flat).
    health_batch: int = 0
    #: how many times a failed instance start is retried before the pool reports it.
    start_retries: int = 3


@dataclass
class ShardingConfig:
    """How the control plane is split into shards behind a coordinator (maigym_ray/envs/coordinator.py).

    Every pool's ``target_size`` and ``max_size`` are split evenly over the shards; each shard owns its own
    instances (in a cluster: the hosts of its nodes), and the coordinator routes every lease to a shard with
    an idle instance and every release to the shard named in the lease id."""

    #: number of shards; 0 = as many as it takes to keep ``instances_per_shard`` or fewer in each.
    shards: int = 0
    #: the most instances (summed ``max_size`` of the pools) one shard holds when ``shards`` is 0.
    instances_per_shard: int = 2500
    #: seconds a caller waits in the coordinator's FIFO queue when no shard has an idle instance, before the
    #: request fails as EnvUnavailableError.
    request_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if self.shards < 0:
            raise ConfigError(f"sharding.shards={self.shards}: need >= 0 (0 = from instances_per_shard)")
        if self.instances_per_shard < 1:
            raise ConfigError(f"sharding.instances_per_shard={self.instances_per_shard}: need >= 1")
        if not self.request_timeout_s > 0:
            raise ConfigError(f"sharding.request_timeout_s={self.request_timeout_s}: need > 0")


def check_choice(name: str, value: str, choices: tuple[str, ...] | list[str]) -> None:
    """Raises :class:`ConfigError` listing ``choices`` when ``value`` is not one of them."""
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not valid; choose one of: {', '.join(choices)}")
