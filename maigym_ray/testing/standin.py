"""The ReDroid stand-in image: a container that runs the fake adb device, for hosts that cannot run ReDroid.

ReDroid needs binder and a pulled image; neither exists on a CI machine. The stand-in keeps the real stack
above the device unchanged: the backend creates the container through the docker SDK with ReDroid's own
arguments (privileged, ``androidboot.redroid_*`` boot arguments, a /data overlay, memory limit), and adb talks
to it over TCP. The container's only process is :mod:`maigym_ray.testing.fake_android`, so the
container's lifecycle is the device's: removing it kills adbd, recreating it boots a fresh device.

How the image is made (no registry, nothing pulled): ``docker import`` of a small rootfs built in memory:

- ``/bin/busybox`` (Debian's busybox-static) and ``/bin/sh`` linking to it;
- ``/opt/maigym/fake_android/`` (that package's modules, copied from this package: stdlib only, relative
  imports);
- ``/init``: ``cd /opt/maigym && exec "$MAIGYM_STANDIN_PYTHON" -S -u -m fake_android "$@"``, so boot arguments
  reach the fake device as they reach ReDroid's init;
- ``/lib`` and ``/lib64`` as the same symlinks the host has (merged /usr).

Python itself is not in the image: the host's interpreter is bind-mounted read-only at run time
(:func:`standin_volumes`: the host's /usr and the interpreter's prefix), so the image stays a few MB and is
built in about a second. The adb port comes from ``MAIGYM_ADB_PORT`` (the backend sets it with host
networking); the device listens on ``FAKE_ADB_HOST`` (default 127.0.0.1). Set ``FAKE_BOOT_DELAY_S`` through
the backend's ``env`` to change the boot time (``never`` never finishes booting).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

STANDIN_IMAGE = "maigym/redroid-standin:test"
#: the fake device's package, copied whole into the image
_FAKE = Path(__file__).with_name("fake_android")


def _python() -> str:
    # the base interpreter, not a venv's (a venv made with --copies would need the venv mounted too)
    return os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)


def standin_volumes() -> list[str]:
    """Read-only bind mounts ("host:container:ro") that give the stand-in the host's Python."""
    mounts = {"/usr"}
    for top in ("/lib", "/lib64"):
        if os.path.isdir(top) and not os.path.islink(top):
            mounts.add(top)
    prefix = os.path.realpath(sys.base_prefix)
    if not any(prefix == m or prefix.startswith(m + "/") for m in mounts):
        mounts.add(prefix)
    return [f"{m}:{m}:ro" for m in sorted(mounts)]


def standin_rootfs(busybox: str = "") -> bytes:
    """The stand-in's root file system as an uncompressed tar."""
    busybox = busybox or shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        raise FileNotFoundError(
            "busybox (static) is needed for the stand-in image: apt-get install busybox-static"
        )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def add_file(name: str, data: bytes, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))

        def add_link(name: str, target: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)

        system = ("bin", "data", "tmp", "proc", "sys", "dev", "etc", "sdcard")
        for d in (*system, "opt", "opt/maigym", "opt/maigym/fake_android"):
            add_dir(d, 0o1777 if d == "tmp" else 0o755)
        add_file("bin/busybox", Path(busybox).read_bytes())
        add_link("bin/sh", "busybox")
        for top in ("lib", "lib64"):
            if os.path.islink("/" + top):
                add_link(top, os.readlink("/" + top))
        for module in sorted(_FAKE.glob("*.py")):
            add_file(f"opt/maigym/fake_android/{module.name}", module.read_bytes(), 0o644)
        init = b'#!/bin/sh\ncd /opt/maigym && exec "$MAIGYM_STANDIN_PYTHON" -S -u -m fake_android "$@"\n'
        add_file("init", init)
        add_file("etc/passwd", b"root:x:0:0:root:/:/bin/sh\n", 0o644)
    return buf.getvalue()


def build_standin_image(client: Any, tag: str = STANDIN_IMAGE, busybox: str = "") -> str:
    """Imports the stand-in image into the docker daemon of ``client`` (a docker.DockerClient); returns its id."""
    repository, _, version = tag.rpartition(":")
    changes = [
        'ENTRYPOINT ["/bin/sh", "/init"]',
        f"ENV MAIGYM_STANDIN_PYTHON={_python()}",
        "ENV FAKE_DATA_DIR=/data",
    ]
    client.api.import_image_from_data(
        standin_rootfs(busybox), repository=repository, tag=version, changes=changes
    )
    return client.images.get(tag).id
