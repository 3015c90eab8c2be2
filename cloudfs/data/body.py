"""Reading a streaming GET's body: whole blocks out of reads that may come back short.

Blocking calls, for a worker thread (``BlockLoader.read_block`` and
``close_stream`` run them on the store's limiter).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import BinaryIO

from cloudfs.lib import gil_free


def read_exact(stream: BinaryIO, length: int, buffer: bytearray | None) -> bytes:
    """``length`` bytes from ``stream`` (fewer at EOF), read into ``buffer`` if it can."""
    readinto = getattr(stream, "readinto", None)
    if readinto is None:
        return read_chunks(stream.read, length)
    if buffer is None or len(buffer) < length:
        buffer = bytearray(length)
    view = memoryview(buffer)[:length]
    got = 0
    while got < length:
        n = readinto(view[got:])
        if not n:
            break
        got += n
    return gil_free.copy(view, 0, got)  # the buffer is reused: a copy, without the GIL


def read_chunks(read: Callable[[int], bytes], length: int) -> bytes:
    """``length`` bytes from a stream whose ``read`` may return short (fewer at EOF)."""
    first = read(length)
    if len(first) == length or not first:
        return bytes(first)
    chunks = [first]
    got = len(first)
    while got < length:
        chunk = read(length - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def close_quietly(stream: BinaryIO) -> None:
    # Closing a half-read HTTP body may fail; there is nothing to recover.
    with contextlib.suppress(Exception):
        stream.close()
