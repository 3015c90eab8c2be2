"""The on-disk format of one cached block: a checksummed file, written atomically.

Each file is a 16-byte header (magic ``CFB1``, crc32 of the payload, payload
length) followed by the payload. Writes go to a temp file in the same
directory and are renamed into place, so a reader sees the old file, the new
file, or none -- never half of one. Nothing is fsync'd: after a crash a
renamed-but-unflushed file may be empty or torn, and the crc32 checked on
*every* read turns that (and any bit rot) into a miss.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import zlib

log = logging.getLogger(__name__)

_MAGIC = b"CFB1"
_HEADER = struct.Struct(">4sIQ")  # magic, crc32, payload length
HEADER_SIZE = _HEADER.size
TMP_SUFFIX = ".tmp"
KEY_RE = re.compile(r"[0-9A-Za-z_-]{2,200}")


def check_key(key: str) -> None:
    if not KEY_RE.fullmatch(key):
        raise ValueError(f"invalid block key {key!r}")


def write_block(path: str, tmp: str, data: bytes) -> None:
    """Write ``data`` to ``tmp`` (creating its directory if needed), then rename it to ``path``."""
    header = _HEADER.pack(_MAGIC, zlib.crc32(data), len(data))
    try:
        f = open(tmp, "wb")  # noqa: SIM115 - retried below after creating the directory
    except FileNotFoundError:
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        f = open(tmp, "wb")  # noqa: SIM115
    with f:
        f.write(header)
        f.write(data)
    os.replace(tmp, path)


def read_verified(path: str) -> bytes | None:
    """The payload of a block file, or None if it is missing, torn or corrupt."""
    try:
        with open(path, "rb") as f:
            header = f.read(HEADER_SIZE)
            if len(header) != HEADER_SIZE:
                _report_corrupt(path, "short header")
                return None
            magic, crc, length = _HEADER.unpack(header)
            if magic != _MAGIC:
                _report_corrupt(path, "bad magic")
                return None
            if os.fstat(f.fileno()).st_size != HEADER_SIZE + length:
                _report_corrupt(path, "wrong length")
                return None
            data = f.read(length)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("disk cache: cannot read %s: %s", path, exc)
        return None
    if len(data) != length or zlib.crc32(data) != crc:
        _report_corrupt(path, "checksum mismatch")
        return None
    return data


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("disk cache: cannot remove %s: %s", path, exc)


def _report_corrupt(path: str, why: str) -> None:
    log.warning("disk cache: dropping damaged block file %s (%s)", path, why)
