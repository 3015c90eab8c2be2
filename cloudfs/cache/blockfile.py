"""The on-disk format of one cached block: a checksummed file, written atomically.

Each file is a 16-byte header (magic ``CFB1``, crc32 of the payload, payload
length) followed by the payload. Writes go to a temp file in the same
directory and are renamed into place, so a reader sees the old file, the new
file, or none -- never half of one. Nothing is fsync'd: after a crash a
renamed-but-unflushed file may be empty or torn.

Checked once, then trusted while unchanged: ``read_verified`` reads a whole
file and checks its crc32, and returns the file's ``Stamp`` (device, inode,
size, mtime, ctime) as it was when read; ``write_block`` returns the stamp
of the file it wrote. ``read_trusted`` then reads any byte range of that file
without a checksum, after one ``fstat`` that must show the same stamp: a file
replaced, truncated, rewritten or touched since is refused (the caller checks
it whole again), so a damaged file is never served. A first read after a
restart (a new process knows no stamps) always checks the whole file.
zlib's crc32 runs at ~4 GiB/s here (benchmarks/RESULTS-reads.md): checking
once, the crc is no longer worth a native dependency or a format change.
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


Stamp = tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def write_block(path: str, tmp: str, data: bytes) -> Stamp:
    """Write ``data`` to ``tmp`` (creating its directory if needed), rename it to ``path``.

    Returns the stamp of the file written (taken after the rename, which may change ctime).
    """
    header = _HEADER.pack(_MAGIC, zlib.crc32(data), len(data))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        fd = os.open(tmp, flags, 0o644)
    try:
        _write_all(fd, [header, data])
        os.replace(tmp, path)
        return stamp_of(os.fstat(fd))
    finally:
        os.close(fd)


# The most one write() hands the kernel. One 4 MiB write into a fresh file cost
# ~6 s of system time per GiB on the benchmark VMs, writes of 1 MiB or less ~0.2 s
# (dd; benchmarks/RESULTS-cold-cost.md): cold reads ran at half speed for it.
WRITE_CHUNK = 1 << 20


def _write_all(fd: int, parts: list[bytes]) -> None:
    views = [memoryview(p) for p in parts if p]
    while views:
        batch, room = [], WRITE_CHUNK
        for view in views:
            if room <= 0:
                break
            batch.append(view[:room])
            room -= len(batch[-1])
        n = os.writev(fd, batch)
        while views and n >= len(views[0]):
            n -= len(views[0])
            views.pop(0)
        if views and n:
            views[0] = views[0][n:]


def read_verified(path: str) -> tuple[bytes, Stamp] | None:
    """The payload of a block file and its stamp, or None if it is missing, torn or corrupt."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            header = f.read(HEADER_SIZE)
            if len(header) != HEADER_SIZE:
                _report_corrupt(path, "short header")
                return None
            magic, crc, length = _HEADER.unpack(header)
            if magic != _MAGIC:
                _report_corrupt(path, "bad magic")
                return None
            if st.st_size != HEADER_SIZE + length:
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
    return data, stamp_of(st)


def read_trusted(path: str, stamp: Stamp, offset: int, length: int) -> bytes | None:
    """Payload bytes ``[offset, offset + length)`` of a file checked earlier, unchecked.

    None if the file is gone or no longer carries ``stamp`` (changed since it
    was checked: the caller must check it whole again). Short at the payload's end.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("disk cache: cannot open %s: %s", path, exc)
        return None
    try:
        if stamp_of(os.fstat(fd)) != stamp:
            return None
        length = max(0, min(length, stamp[2] - HEADER_SIZE - offset))
        data = os.pread(fd, length, HEADER_SIZE + offset)
    except OSError as exc:
        log.warning("disk cache: cannot read %s: %s", path, exc)
        return None
    finally:
        os.close(fd)
    return data if len(data) == length else None


def open_stamped(path: str, stamp: Stamp) -> int | None:
    """A read-only descriptor of ``path`` if the file still carries ``stamp``, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if stamp_of(os.fstat(fd)) == stamp:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def pread_nowait(fd: int, stamp: Stamp, offset: int, length: int) -> bytes | None:
    """Payload bytes from an open block file if they are in the page cache, without blocking.

    ``preadv`` with ``RWF_NOWAIT`` fails instead of waiting for the disk; None
    then, or if the file no longer carries ``stamp``, or on a short read (part
    of the range not cached): the caller reads it in a worker thread.
    """
    if not _NOWAIT:
        return None  # no non-blocking read on this system
    length = max(0, min(length, stamp[2] - HEADER_SIZE - offset))
    buffer = bytearray(length)
    try:
        if stamp_of(os.fstat(fd)) != stamp:
            return None
        got = os.preadv(fd, [buffer], HEADER_SIZE + offset, _NOWAIT) if length else 0
    except OSError:  # BlockingIOError (not cached), EOPNOTSUPP (no RWF_NOWAIT here), EIO...
        return None
    return bytes(buffer) if got == length else None


_NOWAIT = getattr(os, "RWF_NOWAIT", 0)


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("disk cache: cannot remove %s: %s", path, exc)


def _report_corrupt(path: str, why: str) -> None:
    log.warning("disk cache: dropping damaged block file %s (%s)", path, why)
