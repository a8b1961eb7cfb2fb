"""The fake Android device's names where they have always been imported from: the device itself is the
package :mod:`maigym_ray.testing.fake_android` (the wire protocol, the shell line, the device and its adbd), which
the stand-in container runs on its own."""

from __future__ import annotations

from maigym_ray.testing.fake_android.adbd import (
    FakeAdbd,
    device_from_env,
    parse_boot_args,
    serve,
)
from maigym_ray.testing.fake_android.device import (
    BROWSER,
    COMPONENTS,
    KEYCODES,
    LAUNCHER,
    FakeAndroid,
    fetch_title,
    render_png,
)
from maigym_ray.testing.fake_android.shell_line import (
    parse_command_line,
)
from maigym_ray.testing.fake_android.wire import (
    A_AUTH,
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_SYNC,
    A_VERSION_MIN,
    A_VERSION_SKIP_CHECKSUM,
    A_WRTE,
    COMMAND_NAMES,
    HEADER,
    MAX_PAYLOAD,
    ProtocolError,
    checksum,
    pack_message,
    read_message,
    unpack_header,
)

__all__ = [
    "A_AUTH",
    "A_CLSE",
    "A_CNXN",
    "A_OKAY",
    "A_OPEN",
    "A_SYNC",
    "A_VERSION_MIN",
    "A_VERSION_SKIP_CHECKSUM",
    "A_WRTE",
    "BROWSER",
    "COMMAND_NAMES",
    "COMPONENTS",
    "HEADER",
    "KEYCODES",
    "LAUNCHER",
    "MAX_PAYLOAD",
    "FakeAdbd",
    "FakeAndroid",
    "ProtocolError",
    "checksum",
    "device_from_env",
    "fetch_title",
    "pack_message",
    "parse_boot_args",
    "parse_command_line",
    "read_message",
    "render_png",
    "serve",
    "unpack_header",
]
