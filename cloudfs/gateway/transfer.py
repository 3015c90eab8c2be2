"""HTTP/1.1 ``Transfer-Encoding: chunked`` request bodies, decoded as they are read.

The AWS C++ SDK (pyarrow's ``S3FileSystem``) sends its uploads so, with no
Content-Length; ``payload.open_body`` wants the bytes under the HTTP framing
(which may themselves be aws-chunked). Chunk-size lines and trailers are
bounded, so a hostile client cannot make a line grow without end.
"""

from __future__ import annotations

from typing import Protocol

from cloudfs.gateway.errors import S3Error

MAX_LINE = 4096


class Source(Protocol):
    """The connection's buffered reader (``rfile``)."""

    def read(self, size: int, /) -> bytes: ...

    def readline(self, size: int, /) -> bytes: ...


class ChunkedBody:
    """A readable stream of the decoded body; ``b""`` once the last chunk and its
    trailers were read."""

    def __init__(self, stream: Source) -> None:
        self._stream = stream
        self._left = 0  # bytes of the current chunk not read yet
        self._done = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1, /) -> bytes:
        out = bytearray()
        while not self._done and (size < 0 or len(out) < size):
            if self._left == 0:
                self._next_chunk()
                continue
            want = self._left if size < 0 else min(self._left, size - len(out))
            data = self._stream.read(want)
            if not data:
                raise S3Error("IncompleteBody", 400, "the chunked body ended early")
            out += data
            self._left -= len(data)
            if self._left == 0:
                self._line()  # the CRLF after the chunk's data
        return bytes(out)

    def readline(self, size: int = -1, /) -> bytes:
        """Up to and including the next ``\n`` (aws-chunked framing inside is read by
        lines); byte by byte, which is fine for its short lines."""
        out = bytearray()
        while size < 0 or len(out) < size:
            byte = self.read(1)
            out += byte
            if not byte or byte == b"\n":
                break
        return bytes(out)

    def _next_chunk(self) -> None:
        line = self._line().split(b";", 1)[0].strip()
        try:
            self._left = int(line, 16)
        except ValueError:
            raise S3Error("IncompleteBody", 400, "a malformed chunk size in the body") from None
        if self._left < 0:
            raise S3Error("IncompleteBody", 400, "a malformed chunk size in the body")
        if self._left == 0:
            while self._line():  # trailers, up to the empty line
                pass
            self._done = True

    def _line(self) -> bytes:
        line = self._stream.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE or not line.endswith(b"\n"):
            raise S3Error("IncompleteBody", 400, "the chunked body is malformed or ended early")
        return line.rstrip(b"\r\n")
