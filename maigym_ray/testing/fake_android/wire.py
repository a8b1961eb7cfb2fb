"""The adb wire protocol as adbd speaks it: the 24-byte message header (command, arg0, arg1, data length,
data checksum, magic = command ^ 0xffffffff), byte-sum checksums, and reading one message off a stream."""

from __future__ import annotations

import asyncio
import struct

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
