"""The X display's top-level windows (title, class, pid, geometry, focus), read through libX11 with ctypes.

The guest agent lists windows on every observation; one ``xprop``/``xdotool`` process per window property costs
several milliseconds each, while a persistent Xlib connection answers in well under a millisecond. The window
manager (openbox) publishes its managed windows in ``_NET_CLIENT_LIST`` and the focused one in
``_NET_ACTIVE_WINDOW`` (EWMH), which is what we read.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
import zlib
from dataclasses import dataclass

_c_ulong_p = ctypes.POINTER(ctypes.c_ulong)
_ERROR_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def _load() -> ctypes.CDLL:
    lib = ctypes.cdll.LoadLibrary(ctypes.util.find_library("X11") or "libX11.so.6")
    lib.XOpenDisplay.restype = ctypes.c_void_p
    lib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    lib.XCloseDisplay.argtypes = [ctypes.c_void_p]
    lib.XDefaultRootWindow.restype = ctypes.c_ulong
    lib.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    lib.XInternAtom.restype = ctypes.c_ulong
    lib.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.XGetWindowProperty.argtypes = [
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_long,
        ctypes.c_long,
        ctypes.c_int,
        ctypes.c_ulong,
        _c_ulong_p,
        ctypes.POINTER(ctypes.c_int),
        _c_ulong_p,
        _c_ulong_p,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    lib.XFree.argtypes = [ctypes.c_void_p]
    lib.XGetGeometry.argtypes = [
        ctypes.c_void_p,
        ctypes.c_ulong,
        _c_ulong_p,
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_uint),
        ctypes.POINTER(ctypes.c_uint),
        ctypes.POINTER(ctypes.c_uint),
        ctypes.POINTER(ctypes.c_uint),
    ]
    lib.XTranslateCoordinates.argtypes = [
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_int),
        _c_ulong_p,
    ]
    lib.XSetErrorHandler.argtypes = [_ERROR_HANDLER]
    lib.XSetErrorHandler.restype = ctypes.c_void_p
    lib.XGetImage.restype = ctypes.POINTER(_XImage)
    lib.XGetImage.argtypes = [
        ctypes.c_void_p,
        ctypes.c_ulong,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_ulong,
        ctypes.c_int,
    ]
    lib.XDestroyImage.argtypes = [ctypes.POINTER(_XImage)]
    lib.XDefaultScreen.argtypes = [ctypes.c_void_p]
    lib.XDisplayWidth.argtypes = lib.XDisplayHeight.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


class _XImage(ctypes.Structure):
    # the leading fields of Xlib's XImage (the function table that follows is not needed)
    _fields_ = [
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("xoffset", ctypes.c_int),
        ("format", ctypes.c_int),
        ("data", ctypes.c_void_p),
        ("byte_order", ctypes.c_int),
        ("bitmap_unit", ctypes.c_int),
        ("bitmap_bit_order", ctypes.c_int),
        ("bitmap_pad", ctypes.c_int),
        ("depth", ctypes.c_int),
        ("bytes_per_line", ctypes.c_int),
        ("bits_per_pixel", ctypes.c_int),
    ]


def png_from_bgrx(raw: bytes, width: int, height: int, stride: int, level: int = 1) -> bytes:
    """A PNG (8-bit RGB) from 32-bit little-endian BGRX rows of ``stride`` bytes."""
    rows = []
    for y in range(height):
        line = raw[y * stride : y * stride + width * 4]
        rgb = bytearray(width * 3)
        rgb[0::3], rgb[1::3], rgb[2::3] = line[2::4], line[1::4], line[0::4]
        rows.append(b"\0" + bytes(rgb))  # filter type 0 per row

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"".join(rows), level))
        + chunk(b"IEND", b"")
    )


@dataclass(frozen=True)
class Window:
    """One managed top-level window; x/y/w/h in screen pixels."""

    xid: int
    title: str
    wm_class: str
    pid: int
    x: int
    y: int
    w: int
    h: int
    focused: bool


# A window can vanish between listing and querying it (BadWindow). Xlib's default handler exits the process,
# so errors are swallowed here and the half-read window is skipped.
@_ERROR_HANDLER
def _ignore_errors(_dpy: int, _event: int) -> int:
    return 0


class XWindows:
    """A persistent connection to one X display that lists its top-level windows."""

    def __init__(self, display: str) -> None:
        self._x = _load()
        self._x.XSetErrorHandler(_ignore_errors)
        self._dpy = self._x.XOpenDisplay(display.encode())
        if not self._dpy:
            raise OSError(f"cannot open X display {display}")
        self._root = self._x.XDefaultRootWindow(self._dpy)
        self._atoms: dict[str, int] = {}

    def _atom(self, name: str) -> int:
        if name not in self._atoms:
            self._atoms[name] = self._x.XInternAtom(self._dpy, name.encode(), 0)
        return self._atoms[name]

    def _prop(self, win: int, name: str) -> tuple[int, bytes | list[int]] | None:
        typ, fmt = ctypes.c_ulong(), ctypes.c_int()
        n, after, data = ctypes.c_ulong(), ctypes.c_ulong(), ctypes.c_void_p()
        rc = self._x.XGetWindowProperty(
            self._dpy,
            win,
            self._atom(name),
            0,
            4096,
            0,
            0,  # AnyPropertyType
            ctypes.byref(typ),
            ctypes.byref(fmt),
            ctypes.byref(n),
            ctypes.byref(after),
            ctypes.byref(data),
        )
        if rc != 0 or not data.value:
            return None
        try:
            if fmt.value == 32:  # format-32 items are C longs in client memory
                arr = ctypes.cast(data, ctypes.POINTER(ctypes.c_ulong))
                return 32, [arr[i] for i in range(n.value)]
            return fmt.value, ctypes.string_at(data, n.value * fmt.value // 8)
        finally:
            self._x.XFree(data)

    def _ids(self, name: str) -> list[int]:
        p = self._prop(self._root, name)
        return list(p[1]) if p and p[0] == 32 else []  # type: ignore[arg-type]

    def _text(self, win: int, *names: str) -> str:
        for name in names:
            p = self._prop(win, name)
            if p and isinstance(p[1], bytes):
                return p[1].decode("utf-8", "replace")
        return ""

    def wm_ready(self) -> bool:
        """True once an EWMH window manager has announced itself on the root window."""
        return bool(self._ids("_NET_SUPPORTING_WM_CHECK"))

    def active(self) -> int:
        """The focused window's id (0 when none)."""
        ids = self._ids("_NET_ACTIVE_WINDOW")
        return ids[0] if ids else 0

    def list(self) -> list[Window]:
        """Managed windows in stacking-list order, skipping windows that vanished while being read."""
        active = self.active()
        out = []
        for xid in self._ids("_NET_CLIENT_LIST"):
            root, x, y = ctypes.c_ulong(), ctypes.c_int(), ctypes.c_int()
            w, h, bw, depth = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
            if not self._x.XGetGeometry(
                self._dpy,
                xid,
                ctypes.byref(root),
                ctypes.byref(x),
                ctypes.byref(y),
                *map(ctypes.byref, (w, h, bw, depth)),
            ):
                continue
            ax, ay, child = ctypes.c_int(), ctypes.c_int(), ctypes.c_ulong()
            self._x.XTranslateCoordinates(
                self._dpy, xid, self._root, 0, 0, ctypes.byref(ax), ctypes.byref(ay), ctypes.byref(child)
            )
            pid = self._prop(xid, "_NET_WM_PID")
            cls = self._text(xid, "WM_CLASS").split("\0")
            out.append(
                Window(
                    xid=xid,
                    title=self._text(xid, "_NET_WM_NAME", "WM_NAME"),
                    wm_class=cls[1] if len(cls) > 1 else cls[0],
                    pid=int(pid[1][0]) if pid and pid[0] == 32 and pid[1] else 0,  # type: ignore[index]
                    x=ax.value,
                    y=ay.value,
                    w=w.value,
                    h=h.value,
                    focused=xid == active,
                )
            )
        return out

    def screenshot_png(self) -> bytes:
        """PNG of the whole screen through XGetImage: the fallback when mss is not installed."""
        screen = self._x.XDefaultScreen(self._dpy)
        w, h = self._x.XDisplayWidth(self._dpy, screen), self._x.XDisplayHeight(self._dpy, screen)
        img = self._x.XGetImage(self._dpy, self._root, 0, 0, w, h, 0xFFFFFFFF, 2)  # 2 = ZPixmap
        if not img:
            raise OSError("XGetImage failed")
        try:
            im = img.contents
            if im.bits_per_pixel != 32:
                raise OSError(f"unsupported screen format: {im.bits_per_pixel} bits per pixel")
            raw = ctypes.string_at(im.data, im.bytes_per_line * im.height)
            return png_from_bgrx(raw, im.width, im.height, im.bytes_per_line)
        finally:
            self._x.XDestroyImage(img)

    def close(self) -> None:
        """Closes the connection (idempotent)."""
        if self._dpy:
            self._x.XCloseDisplay(self._dpy)
            self._dpy = None
