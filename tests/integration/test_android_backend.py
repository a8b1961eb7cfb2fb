"""The android backend end to end: a real local dockerd, the docker SDK and the real adb client, unchanged.

ReDroid cannot run here (no binder, no image), so the container is the stand-in image
(maigym_ray.testing.standin), whose only process is the fake device speaking the adb wire protocol:
container lifecycle == device lifecycle. The dockerd of this module listens on a unix socket in a temp dir
only (no TCP, no bridge, no iptables); containers use host networking and the fake adbd binds 127.0.0.1.
Tests marked ``redroid`` run the same flow on a real ReDroid image (MAIGYM_REDROID_IMAGE) where one runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict
from pathlib import Path

import pytest

from maigym_ray.actions import parse_action
from maigym_ray.config import AndroidBackendConfig, PoolConfig
from maigym_ray.envs.actor import EnvActor
from maigym_ray.envs.backends.android import AdbClient, AndroidBackend, _free_port
from maigym_ray.envs.backends.web import LocalApps
from maigym_ray.errors import BackendError
from maigym_ray.testing.fake_device import FakeAdbd, FakeAndroid, fetch_title
from maigym_ray.testing.standin import STANDIN_IMAGE, build_standin_image, standin_volumes
from maigym_ray.types import TaskSpec

pytestmark = pytest.mark.integration

ADB = shutil.which("adb")


def _task(start_app: str = "", seeds: dict | None = None) -> TaskSpec:
    return TaskSpec(
        id="android-t",
        instruction="x",
        apps=("mail",),
        platforms=("android",),
        start_app=start_app,
        initial_state=seeds or {},
        verifier={"name": "checks", "params": {"checks": []}},
    )


# -- session fixtures: adb server, dockerd, stand-in image ------------------------------------------------------
@pytest.fixture(scope="session")
def adb_port():
    """A private adb server port for this session; the server is killed at the end."""
    if ADB is None:
        pytest.skip("the adb client is not installed (apt-get install adb)")
    port = _free_port("127.0.0.1")
    yield port
    subprocess.run([ADB, "-P", str(port), "kill-server"], capture_output=True, timeout=20, check=False)


def _unmount_under(root: str) -> None:
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in reversed(mounts):
        mount = mount.replace("\\040", " ")
        if mount == root or mount.startswith(root + "/"):
            subprocess.run(["umount", "-l", mount], capture_output=True, timeout=20, check=False)


@pytest.fixture(scope="session")
def dockerd():
    """A throwaway dockerd: data, exec root, pid file and API socket in a temp dir; no TCP, no bridge."""
    docker = pytest.importorskip(
        "docker", reason="the docker SDK is missing (pip install maigym_ray[android])"
    )
    binary = shutil.which("dockerd") or "/usr/sbin/dockerd"
    if not os.path.exists(binary):
        pytest.skip("dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        pytest.skip(f"dockerd needs root; running as uid {os.geteuid()}")
    tmp = tempfile.mkdtemp(prefix="mgd.", dir="/tmp")  # short: containerd's sockets live under the exec root
    url = f"unix://{tmp}/docker.sock"
    log = open(f"{tmp}/dockerd.log", "wb")  # closed at teardown
    proc = subprocess.Popen(
        [
            binary,
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
            "--userland-proxy=false",
            f"--data-root={tmp}/data",
            f"--exec-root={tmp}/x",
            f"--pidfile={tmp}/docker.pid",
            f"--host={url}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    client = None
    try:
        deadline = time.monotonic() + 40
        while client is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = Path(f"{tmp}/dockerd.log").read_text(errors="replace")[-800:]
                pytest.skip(f"dockerd did not start here (exit {proc.poll()}): {tail}")
            with contextlib.suppress(Exception):
                candidate = docker.DockerClient(base_url=url, timeout=60)
                candidate.ping()
                client = candidate
            time.sleep(0.2)
        yield client, url
    finally:
        if client is not None:
            for c in client.containers.list(all=True, filters={"label": "maigym.backend=android"}):
                with contextlib.suppress(Exception):
                    c.remove(force=True)
            client.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        _unmount_under(tmp)  # dockerd leaves its netns mount (exec root/netns/default) behind
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def standin(dockerd):
    """Builds the stand-in image; returns whether this host can run privileged containers (ReDroid's mode)."""
    client, _ = dockerd
    build_standin_image(client)
    try:  # some sandboxes' root lacks capabilities that --privileged grants
        client.containers.run(
            STANDIN_IMAGE,
            entrypoint=["/bin/busybox", "true"],
            privileged=True,
            remove=True,
            labels={"maigym.backend": "android"},  # removed at teardown even when it could not start
        )
        return True
    except Exception:
        return False


@pytest.fixture
def make_cfg(dockerd, standin, adb_port, tmp_path):
    _, url = dockerd

    def make(**kw) -> AndroidBackendConfig:
        base = dict(
            image=STANDIN_IMAGE,
            docker_url=url,
            width=360,
            height=640,
            dpi=160,
            memory="256m",
            privileged=standin,
            volumes=standin_volumes(),
            env={"FAKE_BOOT_DELAY_S": "0.3"},
            adb_server_port=adb_port,
            data_root=str(tmp_path / "overlays"),
            boot_timeout_s=20,
            boot_poll_s=0.1,
            clear_packages=["com.maigym.fake"],
            settle_s=0,
        )
        base.update(kw)
        return AndroidBackendConfig(**base)

    return make


@pytest.fixture
async def android(make_cfg):
    backends: list[AndroidBackend] = []

    async def make(**kw) -> AndroidBackend:
        b = AndroidBackend(make_cfg(**kw), LocalApps(["mail"]))
        backends.append(b)
        await b.start()
        return b

    yield make
    for b in backends:
        await b.close()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _line(obs, prefix: str) -> str:
    return next(line for line in obs.a11y.splitlines() if line.startswith(prefix))


# -- the real adb client against the fake device, no container --------------------------------------------------
async def test_real_adb_client_speaks_to_the_fake_device(tmp_path, adb_port):
    adbd = FakeAdbd(FakeAndroid(64, 48, boot_delay_s=0, data_dir=tmp_path), port=0)
    port = await adbd.start()
    adb = AdbClient(ADB or "adb", adb_port)
    serial = f"127.0.0.1:{port}"
    try:
        await adb.ensure_server()
        assert (await adb.connect(serial))[0]
        assert (await adb.shell(serial, "getprop sys.boot_completed")).strip() == "1"
        assert (await adb.shell(serial, "getprop ro.product.model")).strip() == "Maigym Stand-in"
        png = await adb.exec_out(serial, "screencap -p")
        assert png.startswith(b"\x89PNG") and len(png) > 100
        xml = await adb.shell(serial, "uiautomator dump /sdcard/u.xml >/dev/null && cat /sdcard/u.xml")
        assert 'text="Counter 0"' in xml
    finally:
        await adb.disconnect(serial)
        await adbd.stop()


# -- the backend on the stand-in container ----------------------------------------------------------------------
async def test_create_passes_redroid_settings_and_observes(android, dockerd, tmp_path):
    b = await android()
    client, _ = dockerd
    c = client.containers.get(b.container_id)
    assert c.status == "running" and c.labels["maigym.instance"] == b.name
    assert c.attrs["Args"][:4] == [
        "/init",
        "androidboot.redroid_width=360",
        "androidboot.redroid_height=640",
        "androidboot.redroid_dpi=160",
    ]
    assert "androidboot.redroid_gpu_mode=guest" in c.attrs["Args"]
    assert c.attrs["HostConfig"]["Memory"] == 256 * 1024 * 1024
    assert c.attrs["HostConfig"]["NetworkMode"] == "host"
    data = next(m for m in c.attrs["Mounts"] if m["Destination"] == "/data")
    assert data["Source"] == str(tmp_path / "overlays" / b.name)
    assert await b.health()

    await b.reset(_task())
    obs = await b.observe()
    assert obs.platform == "android" and (obs.width, obs.height) == (
        360,
        640,
    )  # the boot args reached the device
    assert obs.screenshot.startswith(b"\x89PNG")
    assert obs.a11y.splitlines()[0] == 'app "com.maigym.fake"'
    assert '[counter] button "Counter 0"' in obs.a11y
    counter = next(e for e in obs.elements if e.id == "counter")
    assert (counter.x, counter.y) == (180, 128)


async def test_steps_change_the_screen_through_the_env_actor(make_cfg, dockerd):
    pool = PoolConfig(platform="android", backend="android", options=asdict(make_cfg()))
    actor = EnvActor()
    await actor.start("a1", pool, ["mail"])
    try:
        obs0 = await actor.reset(_task())
        assert '"Counter 0"' in obs0.a11y
        step = await actor.step('click(id="counter")')
        assert step.observation.last_action_error == ""
        assert '"Counter 1"' in step.observation.a11y
        assert step.observation.screenshot != obs0.screenshot  # the screen changed
        step = await actor.step('long_press(id="counter")')
        assert '"Counter 11"' in step.observation.a11y
        step = await actor.step('type(text="hi there", id="input", enter=true)')
        assert _line(step.observation, "[input]") == '[input] textbox "Message" value="hi there" focused'
        assert 'text "hi there"' in step.observation.a11y  # the submitted text
        step = await actor.step('type(text="yo", id="input")')  # replaces the text
        assert _line(step.observation, "[input]") == '[input] textbox "Message" value="yo" focused'
        step = await actor.step('scroll(direction="down", id="list", amount=120)')
        assert '"Item 2"' in _line(step.observation, "[e6]")
        step = await actor.step('click(id="nope")')
        assert "no element with id 'nope'" in step.observation.last_action_error
        step = await actor.step('hotkey(keys=["Control", "a"])')
        assert "not supported on android" in step.observation.last_action_error

        step = await actor.step('open_app(name="mail")')
        obs = step.observation
        assert obs.app == "mail" and obs.a11y.splitlines()[0] == 'app "org.chromium.webview_shell"'
        url = obs.url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mail/")
        # the app is reachable at the device's address, and its control endpoints are not without the secret
        # (urllib runs in a thread: the app host is served by this event loop)
        assert await asyncio.to_thread(_status, url) == 200
        assert await asyncio.to_thread(_status, url.replace("/mail/", "/_control/state")) == 403
        # the device's browser (inside the container) loaded the page from the app host
        title = _line(obs, "[page_title]")
        assert title == f'[page_title] text "{await asyncio.to_thread(fetch_title, url)}"'
        assert "net::ERR" not in title and "HTTP" not in title and title != '[page_title] text ""'
        assert "mail" in await actor.state()
        step = await actor.step("navigate_back()")
        assert '"Counter 11"' in step.observation.a11y

        backend = actor.backend
        assert isinstance(backend, AndroidBackend)
        log = await backend.adb.shell(backend.serial, "cat /data/local/tmp/maigym_input.log")
        assert "input tap 180 128" in log and "input text hi%sthere" in log and "input keyevent 4" in log
    finally:
        await actor.close()


async def test_reset_pm_clear_keeps_the_container(android):
    b = await android(reset="pm_clear")
    await b.reset(_task())
    await b.observe()
    await b.act(parse_action('click(id="counter")'))
    assert '"Counter 1"' in (await b.observe()).a11y
    first = b.container_id
    await b.reset(_task(seeds={"mail": {}}))
    assert b.container_id == first and b.recreations == 0
    assert '"Counter 0"' in (await b.observe()).a11y


@pytest.mark.parametrize("overlay", ["host_dir", "volume"])
async def test_reset_recreate_uses_a_new_container_on_fresh_data(android, dockerd, overlay):
    import docker

    b = await android(reset="recreate", **({"data_root": ""} if overlay == "volume" else {}))
    if overlay == "volume":
        assert dockerd[0].volumes.get(f"{b.name}-data").attrs["Labels"]["maigym.instance"] == b.name
    await b.reset(_task())  # the fresh container serves the first episode as it is
    first = b.container_id
    await b.observe()
    await b.act(parse_action('click(id="counter")'))
    await b.reset(_task())
    assert b.container_id != first and b.recreations == 1
    assert '"Counter 0"' in (await b.observe()).a11y
    with pytest.raises(docker.errors.NotFound):
        dockerd[0].containers.get(first)
    assert await b.health()
    await b.close()
    if overlay == "volume":  # the overlay goes with the container
        with pytest.raises(docker.errors.NotFound):
            dockerd[0].volumes.get(f"{b.name}-data")


async def test_recycle_after_n_episodes(android):
    b = await android(reset="pm_clear", recycle_after=2)
    ids = []
    for _ in range(3):
        await b.reset(_task())
        ids.append(b.container_id)
    assert ids[0] == ids[1] != ids[2] and b.recreations == 1
    assert b.episodes_on_container == 1


async def test_container_that_never_boots_times_out(make_cfg, dockerd):
    import docker

    cfg = make_cfg(env={"FAKE_BOOT_DELAY_S": "never"}, boot_timeout_s=1.5)
    b = AndroidBackend(cfg, LocalApps(["mail"]))
    t0 = time.monotonic()
    with pytest.raises(BackendError, match=rf"container {b.name} .* did not finish booting within 1\.5 s"):
        await b.start()
    assert time.monotonic() - t0 < 15
    with pytest.raises(docker.errors.NotFound):  # nothing is left behind
        dockerd[0].containers.get(b.name)
    await b.close()


async def test_missing_packages_fail_at_start(make_cfg, dockerd):
    b = AndroidBackend(make_cfg(clear_packages=["com.example.absent"]), LocalApps(["mail"]))
    with pytest.raises(BackendError, match=r"lacks package\(s\) \['com.example.absent'\]"):
        await b.start()
    assert not dockerd[0].containers.list(all=True, filters={"name": b.name})
    await b.close()


async def test_health_fails_when_the_container_dies(android, dockerd):
    b = await android()
    assert await b.health()
    dockerd[0].containers.get(b.container_id).kill()
    assert not await b.health()
    name = b.name
    await b.close()
    assert not (Path(b.cfg.data_root) / name).exists()


# -- real ReDroid -----------------------------------------------------------------------------------------------
@pytest.fixture
def redroid_cfg(adb_port, tmp_path):
    image = os.environ.get("MAIGYM_REDROID_IMAGE", "")
    if not image:
        pytest.skip(
            "set MAIGYM_REDROID_IMAGE (e.g. redroid/redroid:13.0.0-latest) on a host that runs ReDroid"
        )
    if not (os.path.exists("/dev/binder") or os.path.exists("/dev/binderfs")):
        pytest.skip("ReDroid needs binder (/dev/binder or binderfs): modprobe binder_linux")
    return AndroidBackendConfig(
        image=image,
        docker_url=os.environ.get("MAIGYM_REDROID_DOCKER_URL", ""),
        network=os.environ.get("MAIGYM_REDROID_NETWORK", "bridge"),
        apps_address=os.environ.get("MAIGYM_REDROID_APPS_ADDRESS", "172.17.0.1"),
        adb_server_port=adb_port,
        data_root=str(tmp_path / "overlays"),
        boot_timeout_s=float(os.environ.get("MAIGYM_REDROID_BOOT_TIMEOUT_S", "180")),
        app_components={"settings": "com.android.settings/.Settings"},
        clear_packages=["com.android.settings"],
        browser_component=os.environ.get("MAIGYM_REDROID_BROWSER", ""),
        recycle_after=2,
        settle_s=1.0,
    )


@pytest.mark.redroid
async def test_redroid_full_flow(redroid_cfg):
    b = AndroidBackend(redroid_cfg, LocalApps(["mail"], bind=redroid_cfg.apps_address))
    try:
        await b.start()
        assert await b.health()
        await b.reset(_task())
        obs = await b.observe()
        assert obs.screenshot.startswith(b"\x89PNG") and obs.a11y.startswith("app ")
        assert (obs.width, obs.height) == (redroid_cfg.width, redroid_cfg.height)
        assert await b.act(parse_action('open_app(name="settings")')) == ""
        obs = await b.observe()
        assert obs.a11y.splitlines()[0] == 'app "com.android.settings"' and obs.app == "settings"
        assert await b.act(parse_action('scroll(direction="down")')) == ""
        assert await b.act(parse_action("navigate_home()")) == ""
        first = b.container_id
        await b.reset(_task())  # pm_clear
        assert b.container_id == first
        await b.reset(_task())  # recycle_after=2
        assert b.container_id != first and await b.health()
    finally:
        await b.close()
