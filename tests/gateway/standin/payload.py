"""Stand-in: the body as sent (aws-chunked framing removed; nothing verified)."""

from __future__ import annotations

import io
from typing import Any, BinaryIO


class _Limited(io.RawIOBase):
    def __init__(self, stream: BinaryIO, left: int) -> None:
        self._stream, self._left = stream, left

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        if self._left <= 0:
            return b""
        want = self._left if size < 0 else min(size, self._left)
        data = self._stream.read(want)
        self._left -= len(data)
        return data


def open_body(
    signed: Any, headers: Any, stream: BinaryIO, content_length: int | None, *, resource: str = ""
) -> BinaryIO:
    body = stream if content_length is None else _Limited(stream, content_length)
    if "aws-chunked" not in str(headers.get("Content-Encoding", "")) and not str(
        headers.get("x-amz-content-sha256", "")
    ).startswith("STREAMING-"):
        return body  # type: ignore[return-value]
    raw = io.BytesIO(body.read())  # a stand-in: holds the body in memory
    out = bytearray()
    while True:
        line = raw.readline().decode().strip()
        size = int(line.split(";")[0], 16)
        if size == 0:
            break
        out += raw.read(size)
        raw.readline()
    return io.BytesIO(bytes(out))
