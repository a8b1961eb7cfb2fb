"""The fake device behind the fake adbd: properties, boot state, its /data, a small fake UI (a launcher with a
counter button, a text field and a scrollable list; a browser screen for VIEW intents; a plain screen for any
other activity), and the shell commands the Android backend runs against it. ``screencap`` renders the UI as
a real PNG, ``uiautomator dump`` as uiautomator's XML."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

# Relative imports only, and the standard library only: the stand-in container runs this package as
# ``python -S -m fake_android`` with nothing of maigym_ray around it (maigym_ray/testing/standin.py).
from .shell_line import parse_command_line

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
