"""aws-chunked bodies: S3's own framing of a streamed upload, decoded as it is read.

The wire form (``x-amz-content-sha256: STREAMING-*``)::

    <hex size>[;chunk-signature=<sig>]\\r\\n<data>\\r\\n   ...repeated...
    0[;chunk-signature=<sig>]\\r\\n
    [<trailer name>:<value>\\r\\n ...][x-amz-trailer-signature:<sig>\\r\\n]
    \\r\\n

Signed modes chain each chunk's signature from the previous one, starting at the
request's own (seed) signature, so chunks cannot be altered, dropped or
reordered; the trailer signature chains from the final empty chunk's. Each chunk
is checked when its last byte has been read, and the end of the body (final
chunk, trailer, decoded length, checksums) before the read that hands out the
last bytes returns; so a reader that reached EOF has a verified payload, and one
that got an S3Error must discard what it read. Memory stays one read's worth
whatever the chunk size: chunk data is hashed as it passes, never held.
"""

from __future__ import annotations

import hashlib
import hmac
import io
from typing import BinaryIO

from cloudfs.gateway.checksums import CHECKSUM_SIZES, BodyDigests, Expectation, decode_checksum
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.sigv4 import Signed, chunk_signature, trailer_signature
from cloudfs.gateway.sigv4_claims import STREAMING_SIGNED_TRAILER, STREAMING_UNSIGNED_TRAILER

MAX_LINE = 4096  # a chunk header is ~90 bytes; a longer line is not aws-chunked
MAX_TRAILERS = 16


def incomplete(resource: str = "") -> S3Error:
    return S3Error(
        "IncompleteBody",
        400,
        "The request body terminated unexpectedly",
        resource=resource,
    )


class Source:
    """The request body as received, cut at Content-Length when there is one."""

    def __init__(self, stream: BinaryIO, length: int | None) -> None:
        self.stream = stream
        self.remaining = length  # None: the framing alone says where the body ends

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes; fewer only at the end of the body."""
        if self.remaining is not None:
            size = min(size, self.remaining)
        parts: list[bytes] = []
        wanted = size
        while wanted > 0:
            data = self.stream.read(wanted)
            if not data:
                break
            parts.append(data)
            wanted -= len(data)
        data = b"".join(parts)
        if self.remaining is not None:
            self.remaining -= len(data)
        return data

    def readline(self, limit: int) -> bytes:
        if self.remaining is not None:
            limit = min(limit, self.remaining)
        if limit <= 0:
            return b""
        line = self.stream.readline(limit)
        if self.remaining is not None:
            self.remaining -= len(line)
        return line


class ChunkedBody(io.RawIOBase):
    """The decoded payload of an aws-chunked body, verified as it streams."""

    def __init__(
        self,
        signed: Signed,
        source: Source,
        digests: BodyDigests,
        *,
        decoded_length: int | None,
        declared_trailers: list[str],
        resource: str = "",
    ) -> None:
        super().__init__()
        self._signed = signed
        self._source = source
        self._digests = digests
        self._decoded_length = decoded_length
        self._resource = resource
        self._chunk_signed = signed.payload != STREAMING_UNSIGNED_TRAILER
        self._trailer_signed = signed.payload == STREAMING_SIGNED_TRAILER
        self._previous = signed.seed_signature
        self._left = 0  # data bytes still to come in the current chunk
        self._claimed = ""  # the current chunk's signature, as sent
        self._chunk_hash = hashlib.sha256()
        self._decoded = 0
        self._started = False
        self._done = False
        self._trailers: dict[str, Expectation | None] = {}
        for name in declared_trailers:
            algorithm = name.removeprefix("x-amz-checksum-")
            if name.startswith("x-amz-checksum-") and algorithm in CHECKSUM_SIZES:
                self._trailers[name] = digests.expect_checksum(algorithm, None)
            else:
                self._trailers[name] = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        if not self._started:
            self._started = True
            self._next_header()
        view = memoryview(buffer).cast("B")
        if self._done or not len(view):
            return 0
        data = self._source.read(min(len(view), self._left))
        if not data:
            raise incomplete(self._resource)
        self._left -= len(data)
        self._decoded += len(data)
        self._digests.update(data)
        if self._chunk_signed:
            self._chunk_hash.update(data)
        if self._left == 0:
            self._end_chunk()
            self._next_header()
        view[: len(data)] = data
        return len(data)

    # -- framing -------------------------------------------------------------

    def _line(self) -> bytes:
        line = self._source.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            if len(line) > MAX_LINE:
                raise self._malformed("a chunk header line is too long")
            raise incomplete(self._resource)
        return line.rstrip(b"\r\n")

    def _next_header(self) -> None:
        text = self._line().decode("latin-1")
        size_text, _, extensions = text.partition(";")
        try:
            size = int(size_text.strip(), 16)
        except ValueError:
            raise self._malformed(f"bad chunk size {size_text[:32]!r}") from None
        if size < 0:
            raise self._malformed("negative chunk size")
        self._claimed = ""
        for extension in extensions.split(";"):
            name, _, value = extension.strip().partition("=")
            if name == "chunk-signature":
                self._claimed = value.strip().lower()
        if self._chunk_signed and not self._claimed:
            raise self._mismatch("a chunk has no chunk-signature")
        if self._decoded_length is not None and self._decoded + size > self._decoded_length:
            raise S3Error(
                "InvalidRequest",
                400,
                "The aws-chunked body holds more bytes than x-amz-decoded-content-length",
                resource=self._resource,
            )
        self._chunk_hash = hashlib.sha256()
        self._left = size
        if size == 0:
            self._verify_chunk()
            self._finish()

    def _end_chunk(self) -> None:
        if self._source.read(2) != b"\r\n":
            raise incomplete(self._resource)
        self._verify_chunk()

    def _verify_chunk(self) -> None:
        if not self._chunk_signed:
            return
        expected = chunk_signature(self._signed, self._previous, self._chunk_hash.hexdigest())
        if not hmac.compare_digest(expected, self._claimed):
            raise self._mismatch("a chunk signature does not match")
        self._previous = expected

    def _finish(self) -> None:
        """After the final empty chunk: the trailer, the length, the digests, the end."""
        self._read_trailer()
        if self._decoded_length is not None and self._decoded != self._decoded_length:
            raise incomplete(self._resource)
        self._digests.verify()
        if self._source.remaining:
            raise S3Error(
                "InvalidRequest",
                400,
                f"{self._source.remaining} bytes follow the end of the aws-chunked body",
                resource=self._resource,
            )
        self._done = True

    def _read_trailer(self) -> None:
        received: list[tuple[str, str]] = []
        signature = ""
        while True:
            line = self._source.readline(MAX_LINE + 1)
            if not line:  # some SDKs end the body without the final empty line
                if self._source.remaining:  # but Content-Length promised more
                    raise incomplete(self._resource)
                break
            if not line.endswith(b"\n"):
                raise self._malformed_trailer()
            text = line.rstrip(b"\r\n").decode("latin-1")
            if not text:
                break
            name, colon, value = text.partition(":")
            if not colon or len(received) >= MAX_TRAILERS:
                raise self._malformed_trailer()
            name, value = name.strip().lower(), value.strip()
            if name == "x-amz-trailer-signature":
                signature = value.lower()
            else:
                received.append((name, value))
        if self._trailer_signed and received:
            canonical = "".join(f"{name}:{value}\n" for name, value in received).encode()
            expected = trailer_signature(self._signed, self._previous, canonical)
            if not hmac.compare_digest(expected, signature):
                raise self._mismatch("the trailer signature does not match")
        values = dict(received)
        for name, expectation in self._trailers.items():
            if name not in values:
                raise self._malformed_trailer()
            if expectation is not None:
                algorithm = name.removeprefix("x-amz-checksum-")
                expectation.expected = decode_checksum(
                    algorithm, values[name], resource=self._resource
                )
        for name in values:
            if name not in self._trailers:
                raise self._malformed_trailer()

    # -- errors ----------------------------------------------------------------

    def _malformed(self, why: str) -> S3Error:
        return S3Error(
            "InvalidRequest", 400, f"Malformed aws-chunked body: {why}", resource=self._resource
        )

    def _malformed_trailer(self) -> S3Error:
        return S3Error(
            "MalformedTrailerError",
            400,
            "The request contained trailing data that was not well-formed "
            "or did not conform to our published schema.",
            resource=self._resource,
        )

    def _mismatch(self, why: str) -> S3Error:
        return S3Error(
            "SignatureDoesNotMatch",
            403,
            f"The request signature we calculated does not match the signature you "
            f"provided ({why}).",
            resource=self._resource,
        )
