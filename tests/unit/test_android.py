"""Android backend logic without a device: adb message framing, the fake device's shell, the uiautomator XML
-> accessibility text parser, and the action -> adb command mapping."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from maigym_ray.actions import PLATFORM_ACTIONS, parse_action
from maigym_ray.config import AndroidBackendConfig
from maigym_ray.envs.backends.android import (
    KEYCODES,
    AndroidBackend,
    boot_args,
    parse_hierarchy,
    png_size,
)
from maigym_ray.testing import fake_device as fd

pytestmark = pytest.mark.unit


# -- framing ----------------------------------------------------------------------------------------------------
def test_message_header_layout_and_checksum():
    msg = fd.pack_message(fd.A_OPEN, 7, 0, b"shell:ls\x00")
    command, arg0, arg1, length, check, magic = struct.unpack("<6I", msg[:24])
    assert (command, arg0, arg1, length) == (0x4E45504F, 7, 0, 9)
    assert check == sum(b"shell:ls\x00") and magic == command ^ 0xFFFFFFFF
    assert msg[24:] == b"shell:ls\x00"
    assert fd.unpack_header(msg[:24]) == (fd.A_OPEN, 7, 0, 9, check)
    assert fd.pack_message(fd.A_OKAY, 1, 2)[12:16] == b"\x00\x00\x00\x00"  # no payload
    assert struct.unpack("<I", fd.pack_message(fd.A_WRTE, 1, 2, b"x", with_checksum=False)[16:20]) == (0,)


def test_header_rejects_bad_magic_and_unknown_commands():
    good = fd.pack_message(fd.A_CNXN, 0x01000000, 4096, b"host::")
    bad_magic = good[:20] + b"\x00\x00\x00\x00"
    with pytest.raises(fd.ProtocolError, match="magic"):
        fd.unpack_header(bad_magic[:24])
    with pytest.raises(fd.ProtocolError, match="unknown command"):
        fd.unpack_header(struct.pack("<6I", 1, 0, 0, 0, 0, 1 ^ 0xFFFFFFFF))
    with pytest.raises(fd.ProtocolError, match="24 bytes"):
        fd.unpack_header(good[:10])


async def _read(raw: bytes, **kw: Any) -> tuple[int, int, int, bytes]:
    reader = asyncio.StreamReader()
    reader.feed_data(raw)
    reader.feed_eof()
    return await fd.read_message(reader, **kw)


async def test_read_message_checks_checksum_and_truncation():
    msg = fd.pack_message(fd.A_WRTE, 3, 4, b"hello")
    assert await _read(msg) == (fd.A_WRTE, 3, 4, b"hello")
    corrupt = msg[:-1] + b"j"
    with pytest.raises(fd.ProtocolError, match="checksum"):
        await _read(corrupt)
    assert (await _read(corrupt, verify=False))[3] == b"hellj"
    with pytest.raises(fd.ProtocolError, match="ended"):
        await _read(msg[:-2])
    with pytest.raises(fd.ProtocolError, match="exceeds"):
        await _read(msg, max_payload=2)


async def test_fake_adbd_handshake_and_shell_stream_with_flow_control(tmp_path):
    device = fd.FakeAndroid(40, 30, boot_delay_s=0, data_dir=tmp_path)
    adbd = fd.FakeAdbd(device, port=0)
    port = await adbd.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(fd.pack_message(fd.A_CNXN, 0x01000001, 4096, b"host::features=shell_v2"))
        cmd, version, maxdata, banner = await fd.read_message(reader)
        assert cmd == fd.A_CNXN and version == fd.A_VERSION_MIN and maxdata == fd.MAX_PAYLOAD
        assert banner.startswith(b"device::ro.product.name=") and b"features" not in banner
        writer.write(fd.pack_message(fd.A_OPEN, 5, 0, b"exec:screencap -p\x00"))
        cmd, local, remote, _ = await fd.read_message(reader)
        assert (cmd, remote) == (fd.A_OKAY, 5)
        png = b""
        while True:
            cmd, a0, a1, data = await fd.read_message(reader)
            if cmd == fd.A_CLSE:
                assert (a0, a1) == (local, 5)
                break
            assert cmd == fd.A_WRTE and len(data) <= 4096  # the negotiated payload size
            png += data
            writer.write(fd.pack_message(fd.A_OKAY, 5, local))  # one write in flight until acknowledged
        assert png_size(png) == (40, 30)
        writer.write(fd.pack_message(fd.A_OPEN, 6, 0, b"sync:\x00"))
        assert (await fd.read_message(reader))[:3] == (fd.A_CLSE, 0, 6)  # unsupported service
    finally:
        writer.close()
        await adbd.stop()


# -- the fake device's shell ------------------------------------------------------------------------------------
def test_shell_line_parsing():
    parsed = fd.parse_command_line(
        'rm -f /a; uiautomator dump \'/sdcard/x y.xml\' >/dev/null && cat "q\\"" 2>/e'
    )
    assert parsed == [
        (";", ["rm", "-f", "/a"], {}),
        (";", ["uiautomator", "dump", "/sdcard/x y.xml"], {">": "/dev/null"}),
        ("&&", ["cat", 'q"'], {"2>": "/e"}),
    ]
    assert fd.parse_command_line("input text 'a;b'")[0][1] == ["input", "text", "a;b"]
    with pytest.raises(ValueError):
        fd.parse_command_line("echo 'open")


def test_fake_device_boot_gating_and_ui(tmp_path):
    dev = fd.FakeAndroid(360, 640, boot_delay_s=None, data_dir=tmp_path)
    assert dev.run_shell("getprop sys.boot_completed") == b"\n"
    assert b"Can't find service" in dev.run_shell("input tap 1 1")
    dev.boot_delay_s = 0
    assert dev.run_shell("getprop sys.boot_completed") == b"1\n"
    assert dev.run_shell("wm size") == b"Physical size: 360x640\n"
    before = dev.screencap()
    dev.run_shell("input tap 180 128")  # the counter button
    assert 'text="Counter 1"' in dev.hierarchy_xml() and dev.screencap() != before
    dev.run_shell("input tap 180 217; input text 'hi%sthere'; input keyevent 66")
    assert dev.app_state()["submitted"] == "hi there"
    assert dev.run_shell("pm clear com.maigym.fake") == b"Success\n"
    assert dev.app_state()["counter"] == 0
    assert b"does not exist" in dev.run_shell("am start -n a.b/.C")
    dev.run_shell("am start -a android.intent.action.VIEW -d http://127.0.0.1:9/mail/")
    assert dev.nodes()[1]["text"] == "http://127.0.0.1:9/mail/"
    assert dev.nodes()[3]["text"].startswith("net::ERR")  # the page could not load
    dev.run_shell("input keyevent 3")
    assert dev.stack[-1]["component"] == fd.LAUNCHER
    assert dev.read_file("/data/local/tmp/maigym_input.log").count(b"input ") == 5


def test_boot_args_become_properties():
    props = fd.parse_boot_args(["androidboot.redroid_width=100", "ro.product.model=X", "qemu=1", "junk"])
    assert props == {"ro.boot.redroid_width": "100", "ro.product.model": "X", "qemu": "1"}
    cfg = AndroidBackendConfig(width=100, height=200, dpi=160, fps=0, gpu_mode="host", extra_args=["a=b"])
    assert boot_args(cfg) == [
        "androidboot.redroid_width=100",
        "androidboot.redroid_height=200",
        "androidboot.redroid_dpi=160",
        "androidboot.redroid_gpu_mode=host",
        "a=b",
    ]


# -- uiautomator XML -> accessibility text ----------------------------------------------------------------------
DUMP = """UI hierchary dumped to: /dev/tty
<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0">
<node index="0" text="" resource-id="" class="android.widget.FrameLayout" package="com.example.mail"
  content-desc="" clickable="false" enabled="true" scrollable="false" bounds="[0,0][1080,2400]">
 <node index="0" text="Inbox" resource-id="com.example.mail:id/title" class="android.widget.TextView"
   package="com.example.mail" content-desc="" clickable="false" enabled="true" bounds="[0,80][1080,200]"/>
 <node index="1" text="" resource-id="com.example.mail:id/search" class="android.widget.EditText"
   package="com.example.mail" content-desc="Search &quot;mail&quot;" clickable="true" focused="true"
   enabled="true" bounds="[40,220][1040,320]"/>
 <node index="2" text="" resource-id="" class="android.widget.LinearLayout" package="com.example.mail"
   content-desc="" clickable="false" enabled="true" bounds="[0,320][1080,400]"/>
 <node index="3" text="Archive" resource-id="com.example.mail:id/action" class="android.widget.Button"
   package="com.example.mail" clickable="true" enabled="false" bounds="[0,400][540,500]"/>
 <node index="4" text="Delete" resource-id="com.example.mail:id/action" class="android.widget.Button"
   package="com.example.mail" clickable="true" enabled="true" bounds="[540,400][1080,500]"/>
 <node index="5" text="Starred" resource-id="" class="android.widget.CheckBox" package="com.example.mail"
   checkable="true" checked="true" clickable="true" enabled="true" bounds="[0,500][540,600]"/>
 <node index="6" text="" resource-id="" class="android.view.View" package="com.example.mail"
   content-desc="Compose" clickable="true" enabled="true" bounds="[900,2200][1040,2340]"/>
 <node index="7" text="ghost" resource-id="" class="android.widget.TextView" package="com.example.mail"
   clickable="false" enabled="true" bounds="[0,0][0,0]"/>
 <node index="8" text="" resource-id="com.example.mail:id/list" class="androidx.recyclerview.widget.RecyclerView"
   package="com.example.mail" scrollable="true" enabled="true" bounds="[0,600][1080,2200]"/>
</node></hierarchy>"""


def test_parse_hierarchy_lines_ids_and_bounds():
    a11y, elements, package = parse_hierarchy(DUMP)
    assert package == "com.example.mail"
    assert a11y.splitlines() == [
        '[title] text "Inbox"',
        '[search] textbox "Search \'mail\'" value="" focused',
        '[action] button "Archive" disabled',
        '[action_2] button "Delete"',
        '[e5] checkbox "Starred" checked',
        '[e6] button "Compose"',
        '[list] list ""',
    ]
    by_id = {e.id: e for e in elements}
    assert (by_id["search"].x, by_id["search"].y, by_id["search"].w, by_id["search"].h) == (
        540,
        270,
        1000,
        100,
    )
    assert by_id["action_2"].role == "button" and by_id["e6"].name == "Compose"
    assert "ghost" not in a11y  # empty boxes are left out


def test_parse_hierarchy_rejects_garbage():
    with pytest.raises(ValueError, match="no UI hierarchy"):
        parse_hierarchy("ERROR: could not get idle state.")
    with pytest.raises(ValueError, match="unparsable"):
        parse_hierarchy("<hierarchy><node></hierarchy>")
    with pytest.raises(ValueError, match="not a PNG"):
        png_size(b"GIF89a")


# -- actions -> adb commands ------------------------------------------------------------------------------------
class _Apps:
    def __init__(self) -> None:
        self.url = "http://127.0.0.1:4321/ns1"
        self.names = ["mail"]


@pytest.fixture
def backend(monkeypatch) -> tuple[AndroidBackend, list[str]]:
    cfg = AndroidBackendConfig(
        width=1000, height=2000, settle_s=0, app_components={"settings": "com.android.settings/.Settings"}
    )
    b = AndroidBackend(cfg, _Apps())  # type: ignore[arg-type]
    b._started, b.container = True, object()
    b._elements = {e.id: e for e in parse_hierarchy(DUMP)[1]}
    sent: list[str] = []

    async def shell(command: str) -> str:
        sent.append(command)
        return "Starting: Intent { }" if command.startswith("am ") else ""

    monkeypatch.setattr(b, "_shell", shell)
    return b, sent


async def test_every_android_action_maps_to_adb(backend):
    b, sent = backend
    cases = {
        'click(id="search")': ["input tap 540 270"],
        "click(x=500, y=500)": ["input tap 500 1000"],
        'long_press(id="e6", duration_ms=900)': ["input swipe 970 2270 970 2270 900"],
        'type(text="hi there", id="search", enter=true)': [
            "input tap 540 270; input text hi%sthere; input keyevent 66"
        ],
        'type(text="it\'s\\nok")': ["input text 'it'\"'\"'s'; input keyevent 66; input text ok"],
        'scroll(direction="down")': ["input swipe 500 1500 500 500 400"],
        'scroll(direction="up", id="list", amount=400)': ["input swipe 540 1200 540 1600 400"],
        'scroll(direction="right", x=500, y=500)': ["input swipe 750 1000 250 1000 400"],
        "swipe(from_x=0, from_y=1000, to_x=1000, to_y=0)": ["input swipe 0 1999 999 0 300"],
        'drag(from_id="e5", to_x=500, to_y=500)': ["input draganddrop 270 550 500 1000 1500"],
        'key(key="Backspace")': ["input keyevent 67"],
        "navigate_back()": ["input keyevent 4"],
        "navigate_home()": ["input keyevent 3"],
        'open_app(name="settings")': ["am start -n com.android.settings/.Settings"],
        'open_app(name="mail")': [
            "am start -a android.intent.action.VIEW -d http://127.0.0.1:4321/ns1/mail/ "
            "-n org.chromium.webview_shell/.WebViewBrowserActivity"
        ],
        "wait(seconds=0)": [],
        'answer(text="x")': [],
        'terminate(status="success")': [],
    }
    covered = {parse_action(text).name for text in cases}
    assert covered == PLATFORM_ACTIONS["android"]
    for text, expected in cases.items():
        sent.clear()
        assert await b.act(parse_action(text)) == "", text
        assert sent == expected, text


async def test_targeted_type_replaces_the_text(backend):
    import dataclasses

    b, sent = backend
    b._elements["search"] = dataclasses.replace(b._elements["search"], value="old")
    assert await b.act(parse_action('type(text="new", id="search")')) == ""
    assert await b.act(parse_action('type(text="new", x=541, y=135)')) == ""  # a point inside the box
    assert sent == ["input tap 540 270; input keyevent 123 67 67 67; input text new"] * 2


async def test_agent_mistakes_are_strings(backend):
    b, sent = backend
    assert "no element with id 'nope'" in await b.act(parse_action('click(id="nope")'))
    assert "unknown app 'bank'" in await b.act(parse_action('open_app(name="bank")'))
    assert "ASCII" in await b.act(parse_action('type(text="héllo")'))
    assert sent == []


def test_keycodes_cover_the_grammar():
    from maigym_ray.actions import KEYS

    assert set(KEYS) <= set(KEYCODES)
    assert (KEYCODES["a"], KEYCODES["z"], KEYCODES["0"], KEYCODES["F12"]) == (29, 54, 7, 142)


# -- config and wiring ------------------------------------------------------------------------------------------
def test_android_pool_config_validates_and_builds():
    from maigym_ray.config import EnvManagerConfig, PoolConfig, validate_manager_config
    from maigym_ray.envs.actor import build_backend
    from maigym_ray.errors import ConfigError

    pool = PoolConfig(platform="android", backend="android")
    validate_manager_config(EnvManagerConfig(pools={"a": pool}))
    backend = build_backend(pool, ["mail"])
    assert isinstance(backend, AndroidBackend) and backend.platform == "android"
    bad = PoolConfig(platform="android", backend="android", options={"reset": "wipe"})
    with pytest.raises(ConfigError, match="choose one of: recreate, pm_clear"):
        validate_manager_config(EnvManagerConfig(pools={"a": bad}))
    with pytest.raises(ConfigError, match="serves platform android"):
        validate_manager_config(EnvManagerConfig(pools={"a": PoolConfig(platform="web", backend="android")}))


def test_container_settings_for_host_and_bridge_networking():
    calls: list[dict[str, Any]] = []

    class _Containers:
        def run(self, image: str, **kw: Any) -> str:
            calls.append({"image": image, **kw})
            return "c"

    class _Docker:
        containers = _Containers()

    cfg = AndroidBackendConfig(
        memory="4g", devices=["/dev/dri/renderD128"], volumes=["/a:/b:ro"], env={"X": "1"}
    )
    b = AndroidBackend(cfg, _Apps())  # type: ignore[arg-type]
    b._docker = _Docker()
    b._run_container("/overlays/x", 5600)
    host = calls[-1]
    assert host["privileged"] is True and host["network_mode"] == "host" and "ports" not in host
    assert host["environment"] == {"X": "1", "MAIGYM_ADB_PORT": "5600"}
    assert host["volumes"] == ["/overlays/x:/data", "/a:/b:ro"] and host["mem_limit"] == "4g"
    assert host["devices"] == ["/dev/dri/renderD128"] and host["command"] == boot_args(cfg)
    b.cfg = AndroidBackendConfig(network="bridge", adb_host="127.0.0.1")
    b._run_container("vol", 0)
    bridge = calls[-1]
    assert bridge["network_mode"] == "bridge" and bridge["ports"] == {"5555/tcp": ("127.0.0.1", None)}
    assert "MAIGYM_ADB_PORT" not in bridge["environment"] and bridge["mem_limit"] is None
