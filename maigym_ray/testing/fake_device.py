"""A fake Android device that speaks the adb wire protocol over TCP: a stand-in for ReDroid's adbd.

It exists because ReDroid cannot run on every machine (it needs binder and an image). Unchanged adb clients
talk to it: the real ``adb`` server (``adb connect host:port``) or any Python adb client. What it speaks:

- the 24-byte message header (command, arg0, arg1, data length, data checksum, magic = command ^ 0xffffffff)
  with byte-sum checksums, the CNXN handshake (no AUTH: like ReDroid with ``ro.adb.secure=0``; the banner
  carries ro.product.* properties and no features, so clients use the legacy ``shell:`` service), OPEN /
  OKAY / WRTE / CLSE streams with one-write-in-flight flow control, several streams at once;
- the services ``shell:<command>`` and ``exec:<command>`` (binary-safe output, no exit status: legacy shell).

The shell understands what the Android backend runs: ``getprop`` (``sys.boot_completed`` turns 1 only after
a boot delay, or never), ``input tap|swipe|text|keyevent|draganddrop``, ``uiautomator dump``, ``cat``,
``screencap -p``, ``am start|force-stop``, ``pm clear|list packages``, ``wm size|density``, ``echo``, ``rm``,
joined with ``;``, ``&&`` or ``||`` and redirected with ``>``. Inputs change a small fake UI (a launcher with a
counter button, a text field and a scrollable list; a browser screen for VIEW intents; a plain screen for any
other activity) whose state lives under the device's /data (so ``pm clear`` and a fresh /data reset it);
``screencap`` renders that UI as a real PNG, ``uiautomator dump`` as uiautomator's XML. Every ``input``
command is appended to /data/local/tmp/maigym_input.log.

Run as a script (stdlib only, so a container can run it with the host's Python)::

    python fake_device.py androidboot.redroid_width=720 androidboot.redroid_height=1280 ...

Environment: ``MAIGYM_ADB_PORT`` (default 5555), ``FAKE_ADB_HOST`` (default 127.0.0.1), ``FAKE_BOOT_DELAY_S``
(seconds until boot completes, or ``never``; default 1), ``FAKE_DATA_DIR`` (default /data).
See :mod:`maigym_ray.testing.standin` for the stand-in container image that runs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import struct
import sys
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

# -- the wire protocol ----------------------------------------------------------------------------------------
A_SYNC = 0x434E5953
A_CNXN = 0x4E584E43
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_AUTH = 0x48545541
A_VERSION_MIN = 0x01000000  # checksums are computed and verified
A_VERSION_SKIP_CHECKSUM = 0x01000001
MAX_PAYLOAD = 256 * 1024
HEADER = struct.Struct("<6I")
COMMAND_NAMES = {A_SYNC: "SYNC", A_CNXN: "CNXN", A_OPEN: "OPEN", A_OKAY: "OKAY", A_CLSE: "CLSE"}
COMMAND_NAMES.update({A_WRTE: "WRTE", A_AUTH: "AUTH"})


class ProtocolError(Exception):
    """A malformed adb message (bad magic, bad checksum, oversized payload, truncated stream)."""


def checksum(data: bytes) -> int:
    """adb's payload checksum: the byte sum modulo 2**32."""
    return sum(data) & 0xFFFFFFFF


def pack_message(command: int, arg0: int, arg1: int, data: bytes = b"", with_checksum: bool = True) -> bytes:
    """One adb message: the 24-byte little-endian header followed by the payload."""
    check = checksum(data) if with_checksum else 0
    return HEADER.pack(command, arg0, arg1, len(data), check, command ^ 0xFFFFFFFF) + data


def unpack_header(raw: bytes) -> tuple[int, int, int, int, int]:
    """(command, arg0, arg1, data_length, data_check) of a header; ProtocolError when it is not one."""
    if len(raw) != HEADER.size:
        raise ProtocolError(f"an adb header is {HEADER.size} bytes, got {len(raw)}")
    command, arg0, arg1, length, check, magic = HEADER.unpack(raw)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic {magic:#010x} for command {command:#010x}")
    if command not in COMMAND_NAMES and command != 0x534C5453:  # STLS
        raise ProtocolError(f"unknown command {command:#010x}")
    return command, arg0, arg1, length, check


async def read_message(
    reader: asyncio.StreamReader, verify: bool = True, max_payload: int = 1024 * 1024
) -> tuple[int, int, int, bytes]:
    """Reads one message: (command, arg0, arg1, payload). Verifies the checksum unless ``verify`` is false."""
    try:
        raw = await reader.readexactly(HEADER.size)
        command, arg0, arg1, length, check = unpack_header(raw)
        if length > max_payload:
            raise ProtocolError(f"payload of {length} bytes exceeds {max_payload}")
        data = await reader.readexactly(length) if length else b""
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError("the stream ended inside a message") from exc
    if verify and checksum(data) != check:
        raise ProtocolError(f"bad checksum {check:#x} (computed {checksum(data):#x})")
    return command, arg0, arg1, data


# -- the fake UI ----------------------------------------------------------------------------------------------
LAUNCHER = "com.maigym.fake/.MainActivity"
BROWSER = "org.chromium.webview_shell/.WebViewBrowserActivity"
COMPONENTS = (LAUNCHER, BROWSER, "com.android.settings/.Settings")
KEYCODES = {"KEYCODE_HOME": 3, "KEYCODE_BACK": 4, "KEYCODE_ENTER": 66, "KEYCODE_DEL": 67}
_LONG_PRESS_MS = 500


def _color(seed: str) -> tuple[int, int, int]:
    h = zlib.crc32(seed.encode())
    return (64 + (h & 0x7F), 64 + ((h >> 8) & 0x7F), 64 + ((h >> 16) & 0x7F))


def render_png(width: int, height: int, bg: tuple[int, int, int], rects: list[tuple]) -> bytes:
    """An RGB PNG of ``bg`` with filled rectangles (x1, y1, x2, y2, (r, g, b)) painted in order."""
    rows: dict[tuple[int, ...], bytes] = {}
    out = bytearray()
    for y in range(height):
        key = tuple(i for i, r in enumerate(rects) if r[1] <= y < r[3])
        row = rows.get(key)
        if row is None:
            buf = bytearray(bytes(bg) * width)
            for i in key:
                x1, _, x2, _, color = rects[i]
                x1, x2 = max(0, x1), min(width, x2)
                if x2 > x1:
                    buf[x1 * 3 : x2 * 3] = bytes(color) * (x2 - x1)
            row = rows[key] = b"\x00" + bytes(buf)
        out += row

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(bytes(out), 1))
        + chunk(b"IEND", b"")
    )


class FakeAndroid:
    """The device: properties, boot state, a tiny file system view and the fake UI."""

    def __init__(
        self,
        width: int = 720,
        height: int = 1280,
        dpi: int = 320,
        boot_delay_s: float | None = 1.0,
        data_dir: str | os.PathLike[str] = "/data",
        props: dict[str, str] | None = None,
    ) -> None:
        self.width, self.height, self.dpi = width, height, dpi
        self.boot_delay_s = boot_delay_s  # None = never boots
        self.started = time.monotonic()
        self.data_dir = Path(data_dir)
        self.props: dict[str, str] = {
            "ro.product.name": "redroid_standin",
            "ro.product.model": "Maigym Stand-in",
            "ro.product.device": "standin",
            "ro.build.version.release": "13",
            "ro.build.version.sdk": "33",
            **(props or {}),
        }
        self.stack: list[dict[str, str]] = [{"component": LAUNCHER, "url": ""}]
        self.files: dict[str, bytes] = {}

    # -- state ------------------------------------------------------------------------------------------
    @property
    def booted(self) -> bool:
        return self.boot_delay_s is not None and time.monotonic() - self.started >= self.boot_delay_s

    def _prefs_path(self) -> Path:
        return self.data_dir / "data" / "com.maigym.fake" / "shared_prefs" / "state.json"

    def app_state(self) -> dict[str, Any]:
        """The launcher app's persisted state (under /data/data/com.maigym.fake)."""
        try:
            return {"counter": 0, "text": "", "scroll": 0, "focused": False, "submitted": ""} | json.loads(
                self._prefs_path().read_text()
            )
        except (OSError, ValueError):
            return {"counter": 0, "text": "", "scroll": 0, "focused": False, "submitted": ""}

    def _save(self, state: dict[str, Any]) -> None:
        path = self._prefs_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state))

    def _host_path(self, path: str) -> Path | None:
        if path.startswith("/sdcard/"):
            return self.data_dir / "media" / "0" / path[len("/sdcard/") :]
        if path.startswith("/data/"):
            return self.data_dir / path[len("/data/") :]
        return None

    def write_file(self, path: str, data: bytes) -> None:
        if path == "/dev/null":
            return
        host = self._host_path(path)
        if host is None:
            self.files[path] = data
            return
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_bytes(data)

    def read_file(self, path: str) -> bytes | None:
        host = self._host_path(path)
        if host is None:
            return self.files.get(path)
        try:
            return host.read_bytes()
        except OSError:
            return None

    # -- the screen -------------------------------------------------------------------------------------
    def nodes(self) -> list[dict[str, Any]]:
        """The current screen as uiautomator-like nodes (the first is the root)."""
        w, h = self.width, self.height
        top = self.stack[-1]
        pkg = top["component"].split("/")[0]

        def node(cls: str, b: tuple[int, int, int, int], **kw: Any) -> dict[str, Any]:
            return {"class": cls, "package": pkg, "bounds": b, "text": "", "rid": "", "desc": ""} | kw

        nodes = [node("android.widget.FrameLayout", (0, 0, w, h))]
        if top["component"] == LAUNCHER:
            s = self.app_state()
            nodes += [
                node("android.widget.TextView", (0, 0, w, h * 8 // 100), text="Fake Home", rid="title"),
                node(
                    "android.widget.Button",
                    (w // 10, h * 15 // 100, w * 9 // 10, h * 25 // 100),
                    text=f"Counter {s['counter']}",
                    rid="counter",
                    clickable=True,
                ),
                node(
                    "android.widget.EditText",
                    (w // 10, h * 30 // 100, w * 9 // 10, h * 38 // 100),
                    text=s["text"],
                    rid="input",
                    clickable=True,
                    focused=s["focused"],
                    desc="Message",
                ),
                node(
                    "android.widget.Button",
                    (w // 10, h * 42 // 100, w // 2, h * 50 // 100),
                    text="Reset",
                    rid="reset",
                    clickable=True,
                ),
                node(
                    "android.widget.ScrollView",
                    (0, h * 55 // 100, w, h),
                    rid="list",
                    scrollable=True,
                ),
            ]
            item_h = h * 9 // 100
            for i in range(5):
                y = h * 55 // 100 + i * item_h
                nodes.append(
                    node("android.widget.TextView", (0, y, w, y + item_h), text=f"Item {s['scroll'] + i}")
                )
            if s["submitted"]:
                nodes.append(
                    node(
                        "android.widget.TextView",
                        (w // 2, h * 42 // 100, w, h * 50 // 100),
                        text=s["submitted"],
                    )
                )
        elif pkg == BROWSER.split("/")[0]:
            url = top["url"]
            nodes += [
                node(
                    "android.widget.EditText",
                    (0, 0, w, h * 8 // 100),
                    text=url,
                    rid="url_field",
                    clickable=True,
                ),
                node("android.webkit.WebView", (0, h * 8 // 100, w, h), desc=url, scrollable=True),
                node(
                    "android.widget.TextView",
                    (w // 10, h * 20 // 100, w * 9 // 10, h * 30 // 100),
                    text=top.get("title", ""),
                    rid="page_title",
                ),
            ]
        else:
            nodes += [
                node("android.widget.TextView", (0, 0, w, h // 10), text=top["component"], rid="title"),
                node(
                    "android.widget.Button",
                    (w // 4, h // 2, w * 3 // 4, h * 6 // 10),
                    text="OK",
                    clickable=True,
                ),
            ]
        return nodes

    def hierarchy_xml(self) -> str:
        """The screen in the format of ``uiautomator dump``."""
        out = ["<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">"]
        for i, n in enumerate(self.nodes()):
            x1, y1, x2, y2 = n["bounds"]
            rid = f"{n['package']}:id/{n['rid']}" if n["rid"] else ""
            attrs = {
                "index": str(i),
                "text": n["text"],
                "resource-id": rid,
                "class": n["class"],
                "package": n["package"],
                "content-desc": n["desc"],
                "checkable": "false",
                "checked": "false",
                "clickable": str(bool(n.get("clickable"))).lower(),
                "enabled": "true",
                "focusable": str(bool(n.get("clickable"))).lower(),
                "focused": str(bool(n.get("focused"))).lower(),
                "scrollable": str(bool(n.get("scrollable"))).lower(),
                "long-clickable": str(bool(n.get("clickable"))).lower(),
                "password": "false",
                "selected": "false",
                "bounds": f"[{x1},{y1}][{x2},{y2}]",
            }
            body = " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items())
            out.append(f"<node {body}>" if i == 0 else f"<node {body} />")
        out.append("</node></hierarchy>")
        return "".join(out)

    def screencap(self) -> bytes:
        """The screen as a PNG: element boxes in colours that follow the state, so any change shows."""
        rects = []
        for n in self.nodes()[1:]:
            x1, y1, x2, y2 = n["bounds"]
            rects.append(
                (x1 + 2, y1 + 2, x2 - 2, y2 - 2, _color(n["class"] + n["text"] + str(n.get("focused"))))
            )
        return render_png(self.width, self.height, _color(self.stack[-1]["component"]), rects)

    def _hit(self, x: int, y: int) -> dict[str, Any] | None:
        for n in reversed(self.nodes()[1:]):
            x1, y1, x2, y2 = n["bounds"]
            if x1 <= x < x2 and y1 <= y < y2 and (n.get("clickable") or n.get("scrollable")):
                return n
        return None

    # -- input ------------------------------------------------------------------------------------------
    def tap(self, x: int, y: int, long: bool = False) -> None:
        if self.stack[-1]["component"] != LAUNCHER:
            return
        s, hit = self.app_state(), self._hit(x, y)
        rid = hit["rid"] if hit else ""
        s["focused"] = rid == "input"
        if rid == "counter":
            s["counter"] += 10 if long else 1
        elif rid == "reset":
            s["counter"] = 0
        self._save(s)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        if abs(x2 - x1) < 10 and abs(y2 - y1) < 10:
            self.tap(x1, y1, long=duration_ms >= _LONG_PRESS_MS)
            return
        if self.stack[-1]["component"] != LAUNCHER:
            return
        hit = self._hit(x1, y1)
        if hit and hit["rid"] == "list" and abs(y2 - y1) > abs(x2 - x1):
            s = self.app_state()
            steps = max(1, abs(y2 - y1) // max(1, self.height * 9 // 100))
            s["scroll"] = max(0, s["scroll"] + (steps if y2 < y1 else -steps))
            self._save(s)

    def text(self, text: str) -> None:
        s = self.app_state()
        if self.stack[-1]["component"] == LAUNCHER and s["focused"]:
            s["text"] += text.replace("%s", " ")
            self._save(s)

    def keyevent(self, code: int) -> None:
        s = self.app_state()
        if code == 3:
            self.stack = self.stack[:1]
        elif code == 4:
            if len(self.stack) > 1:
                self.stack.pop()
            elif s["focused"]:
                s["focused"] = False
        elif self.stack[-1]["component"] == LAUNCHER and s["focused"]:
            if code == 67:
                s["text"] = s["text"][:-1]
            elif code == 66:
                s["submitted"] = s["text"]
        self._save(s)

    # -- the shell --------------------------------------------------------------------------------------
    def run_shell(self, line: str) -> bytes:
        """Runs a command line; returns stdout and stderr together (what the legacy shell service sends)."""
        out = bytearray()
        rc = 0
        for op, words, redirects in parse_command_line(line):
            if (op == "&&" and rc != 0) or (op == "||" and rc == 0):
                continue
            if not words:
                continue
            try:
                stdout, stderr, rc = self._command(words)
            except (ValueError, IndexError) as exc:
                stdout, stderr, rc = b"", f"{words[0]}: {exc}\n".encode(), 1
            if ">" in redirects:
                self.write_file(redirects[">"], stdout)
                stdout = b""
            if "2>" in redirects:
                self.write_file(redirects["2>"], stderr)
                stderr = b""
            out += stdout + stderr
        return bytes(out)

    def _command(self, w: list[str]) -> tuple[bytes, bytes, int]:
        cmd, args = w[0], w[1:]
        if cmd == "getprop":
            props = dict(self.props)
            if self.booted:
                props["sys.boot_completed"] = "1"
            if not args:
                return "".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())).encode(), b"", 0
            return (props.get(args[0], args[1] if len(args) > 1 else "") + "\n").encode(), b"", 0
        if cmd in ("echo", "true", "false", "sleep"):
            if cmd == "sleep":
                time.sleep(min(float(args[0]), 2.0))
            return ((" ".join(args) + "\n").encode() if cmd == "echo" else b""), b"", int(cmd == "false")
        if cmd == "cat":
            out, err = bytearray(), bytearray()
            for path in args:
                data = self.read_file(path)
                if data is None:
                    err += f"cat: {path}: No such file or directory\n".encode()
                else:
                    out += data
            return bytes(out), bytes(err), 1 if err else 0
        if cmd == "rm":
            for path in (a for a in args if not a.startswith("-")):
                host = self._host_path(path)
                if host is not None and host.is_dir():
                    shutil.rmtree(host, ignore_errors=True)
                elif host is not None:
                    host.unlink(missing_ok=True)
                else:
                    self.files.pop(path, None)
            return b"", b"", 0
        if not self.booted:  # system services are not up yet
            return b"", f"cmd: Can't find service: {cmd}\n".encode(), 1
        if cmd == "input":
            return self._input(args)
        if cmd == "uiautomator":
            if not args or args[0] != "dump":
                return b"", b"Usage: uiautomator dump [file]\n", 1
            path = args[1] if len(args) > 1 else "/sdcard/window_dump.xml"
            self.write_file(path, self.hierarchy_xml().encode())
            return f"UI hierchary dumped to: {path}\n".encode(), b"", 0
        if cmd == "screencap":
            paths = [a for a in args if not a.startswith("-")]
            png = self.screencap()
            if paths:
                self.write_file(paths[0], png)
                return b"", b"", 0
            return png, b"", 0
        if cmd == "am":
            return self._am(args)
        if cmd == "pm":
            if args[:1] == ["clear"] and len(args) > 1:
                if args[-1] not in {c.split("/")[0] for c in COMPONENTS}:
                    return b"Failed\n", b"", 1
                shutil.rmtree(self.data_dir / "data" / args[-1], ignore_errors=True)
                self._stop(args[-1])
                return b"Success\n", b"", 0
            if args[:2] == ["list", "packages"]:
                return "".join(f"package:{c.split('/')[0]}\n" for c in COMPONENTS).encode(), b"", 0
            return b"", b"pm: unknown command\n", 1
        if cmd == "wm":
            if args[:1] == ["size"]:
                return f"Physical size: {self.width}x{self.height}\n".encode(), b"", 0
            if args[:1] == ["density"]:
                return f"Physical density: {self.dpi}\n".encode(), b"", 0
            return b"", b"wm: unknown command\n", 1
        return b"", f"/system/bin/sh: {cmd}: inaccessible or not found\n".encode(), 127

    def _input(self, args: list[str]) -> tuple[bytes, bytes, int]:
        self.write_file(
            "/data/local/tmp/maigym_input.log",
            (self.read_file("/data/local/tmp/maigym_input.log") or b"")
            + (" ".join(["input", *args]) + "\n").encode(),
        )
        if args and args[0] in ("touchscreen", "touchpad", "keyboard"):
            args = args[1:]
        kind, a = (args[0], args[1:]) if args else ("", [])
        if kind == "tap" and len(a) == 2:
            self.tap(int(float(a[0])), int(float(a[1])))
        elif kind in ("swipe", "draganddrop") and len(a) >= 4:
            x1, y1, x2, y2 = (int(float(v)) for v in a[:4])
            self.swipe(x1, y1, x2, y2, int(a[4]) if len(a) > 4 else 300)
        elif kind == "text" and len(a) == 1:
            self.text(a[0])
        elif kind == "keyevent" and a:
            for code in a:
                self.keyevent(int(code) if code.isdigit() else KEYCODES.get(code, 0))
        else:
            return b"", b"Error: Unknown command or bad arguments: " + " ".join(args).encode() + b"\n", 1
        return b"", b"", 0

    def _stop(self, package: str) -> None:
        """Closes the package's activities (the launcher at the bottom of the stack always stays)."""
        self.stack = self.stack[:1] + [
            e for e in self.stack[1:] if not e["component"].startswith(package + "/")
        ]

    def _am(self, args: list[str]) -> tuple[bytes, bytes, int]:
        if args[:1] == ["force-stop"] and len(args) > 1:
            self._stop(args[1])
            return b"", b"", 0
        if args[:1] != ["start"]:
            return b"", b"am: unknown command\n", 1
        opts: dict[str, str] = {}
        it = iter(args[1:])
        for a in it:
            if a in ("-n", "-a", "-d", "-t", "-c", "--user"):
                opts[a] = next(it)
            elif a in ("-f", "-e", "--es", "--ei", "--ez"):
                next(it)
                if a != "-f":
                    next(it)
        comp = opts.get("-n", "")
        if not comp and opts.get("-a") == "android.intent.action.VIEW" and opts.get("-d"):
            comp = BROWSER
        if comp not in COMPONENTS:
            return (
                f"Starting: Intent {{ cmp={comp} }}\n".encode(),
                f"Error type 3\nError: Activity class {{{comp}}} does not exist.\n".encode(),
                1,
            )
        url = opts.get("-d", "")
        entry = {"component": comp, "url": url}
        if comp == BROWSER and url.startswith(("http://", "https://")):
            entry["title"] = fetch_title(url)  # the browser loads the page from inside the device
        self.stack.append(entry)
        desc = f"act={opts['-a']} " if "-a" in opts else ""
        desc += f"dat={opts['-d']} " if "-d" in opts else ""
        return f"Starting: Intent {{ {desc}cmp={comp} }}\n".encode(), b"", 0


def fetch_title(url: str, timeout_s: float = 3.0) -> str:
    """The page's <title> as the device's browser would load it, or the network error it would show."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            page = r.read(65536).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return f"net::ERR {type(exc).__name__}"
    m = re.search(r"<title>(.*?)</title>", page, re.S | re.I)
    return " ".join(m.group(1).split()) if m else ""


def parse_command_line(line: str) -> list[tuple[str, list[str], dict[str, str]]]:
    """Splits a shell line into (operator before, words, redirections) with sh quoting rules (no expansion)."""
    tokens: list[tuple[str, bool]] = []  # (text, is_operator)
    cur, have, i = [], False, 0
    while i < len(line):
        c = line[i]
        if c in " \t\n":
            if have:
                tokens.append(("".join(cur), False))
                cur, have = [], False
        elif c == "'":
            j = line.find("'", i + 1)
            if j < 0:
                raise ValueError("unterminated quote")
            cur.append(line[i + 1 : j])
            have, i = True, j
        elif c == '"':
            i += 1
            while i < len(line) and line[i] != '"':
                if line[i] == "\\" and i + 1 < len(line) and line[i + 1] in '"\\$`':
                    i += 1
                cur.append(line[i])
                i += 1
            if i >= len(line):
                raise ValueError("unterminated quote")
            have = True
        elif c == "\\" and i + 1 < len(line):
            cur.append(line[i + 1])
            have, i = True, i + 1
        elif c in ";&|>":
            op = line[i : i + 2] if line[i : i + 2] in ("&&", "||", ">>") else c
            if op == ">" and have and "".join(cur) == "2" and line[i - 1] == "2":
                cur, have, op = [], False, "2>"
            if have:
                tokens.append(("".join(cur), False))
                cur, have = [], False
            tokens.append((op, True))
            i += len(op) - 1 if op != "2>" else 0
        else:
            cur.append(c)
            have = True
        i += 1
    if have:
        tokens.append(("".join(cur), False))
    commands: list[tuple[str, list[str], dict[str, str]]] = []
    op, words, redirects = ";", [], {}
    it = iter(tokens)
    for text, is_op in it:
        if not is_op:
            words.append(text)
        elif text in (">", ">>", "2>"):
            target = next(it, ("", True))
            if target[1] or not target[0]:
                raise ValueError("syntax error: redirection without a file")
            redirects[">" if text == ">>" else text] = target[0]
        elif text in (";", "&&", "||"):
            commands.append((op, words, redirects))
            op, words, redirects = text, [], {}
        else:
            raise ValueError(f"unsupported shell operator {text!r}")
    commands.append((op, words, redirects))
    return commands


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


async def _main(argv: list[str]) -> None:
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


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
