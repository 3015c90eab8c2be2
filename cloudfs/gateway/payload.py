"""The body of an authenticated S3 request, decoded and verified as it is read.

:func:`open_body` turns the raw request stream into the payload the client meant,
whatever ``x-amz-content-sha256`` mode it signed (see :class:`Signed.payload`):

* a hex SHA-256: the body as is, its SHA-256 compared at the end
  (XAmzContentSHA256Mismatch);
* ``UNSIGNED-PAYLOAD``: the body as is, unverified but for the digests below;
* ``STREAMING-*``: aws-chunked framing removed, chunk and trailer signatures and
  trailer checksums verified (:mod:`cloudfs.gateway.chunked`).

In every mode a ``Content-MD5`` header and an ``x-amz-checksum-*`` header are
verified over the decoded bytes (BadDigest). Objects may be GiBs, so nothing is
held: each check runs on the bytes as they pass and fails, with S3's error, in
the read that reaches the end. EOF therefore means "verified"; the gateway must
not commit an object before it, and must discard it on an S3Error.
"""

from __future__ import annotations

import hashlib
import hmac
import io
from typing import BinaryIO

from cloudfs.gateway.checksums import CHECKSUM_SIZES, BodyDigests
from cloudfs.gateway.chunked import ChunkedBody, Source
from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.sigv4 import HeaderItems, Signed, header_lists
from cloudfs.gateway.sigv4_claims import STREAMING_MODES, UNSIGNED_PAYLOAD

READ_BUFFER = 256 * 1024


class Body(io.BufferedReader):
    """The payload stream; ``length``: its decoded size where the request declared it."""

    length: int | None = None


def open_body(
    signed: Signed,
    headers: HeaderItems,
    stream: BinaryIO,
    content_length: int | None,
    *,
    resource: str = "",
) -> Body:
    """The decoded payload as a readable stream; S3Error at the point it proves wrong.

    ``content_length``: the Content-Length header, None when the request had none
    (then only an aws-chunked body, which frames its own end, is accepted: the
    server must hand over a stream already stripped of HTTP chunked encoding).
    Pass 0 for a request without a body.
    """
    found = header_lists(headers)
    digests = BodyDigests(resource=resource)
    if md5 := _one(found, "content-md5"):
        digests.expect_md5(md5)
    checksums = [
        name
        for name in found
        if name.removeprefix("x-amz-checksum-") in CHECKSUM_SIZES
        and name.startswith("x-amz-checksum-")
    ]
    if len(checksums) > 1:
        raise S3Error(
            "InvalidRequest", 400, "Expecting a single x-amz-checksum- header", resource=resource
        )
    for name in checksums:
        digests.expect_checksum(name.removeprefix("x-amz-checksum-"), _one(found, name))
    if signed.payload in STREAMING_MODES:
        length = _decoded_length(found, resource)
        raw: io.RawIOBase = ChunkedBody(
            signed,
            Source(stream, content_length),
            digests,
            decoded_length=length,
            declared_trailers=_declared_trailers(found),
            resource=resource,
        )
    else:
        if content_length is None:
            raise S3Error(
                "MissingContentLength",
                411,
                "You must provide the Content-Length HTTP header.",
                resource=resource,
            )
        sha256 = None if signed.payload == UNSIGNED_PAYLOAD else signed.payload.lower()
        raw = PlainBody(
            Source(stream, content_length), content_length, sha256, digests, resource=resource
        )
        length = content_length
    body = Body(raw, buffer_size=READ_BUFFER)
    body.length = length
    return body


class PlainBody(io.RawIOBase):
    """A body sent as is: Content-Length bytes, checked against the promised digests."""

    def __init__(
        self,
        source: Source,
        length: int,
        sha256: str | None,
        digests: BodyDigests,
        *,
        resource: str = "",
    ) -> None:
        super().__init__()
        self._source = source
        self._left = length
        self._sha256 = sha256
        self._hash = hashlib.sha256() if sha256 is not None else None
        self._digests = digests
        self._resource = resource
        self._verified = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._left == 0:
            self._verify()
            return 0
        if not len(view):
            return 0
        data = self._source.read(min(len(view), self._left))
        if not data:
            raise S3Error(
                "IncompleteBody",
                400,
                "You did not provide the number of bytes specified by the "
                "Content-Length HTTP header",
                resource=self._resource,
            )
        self._left -= len(data)
        self._digests.update(data)
        if self._hash is not None:
            self._hash.update(data)
        if self._left == 0:
            self._verify()  # before the last bytes are handed out
        view[: len(data)] = data
        return len(data)

    def _verify(self) -> None:
        if self._verified:
            return
        sha256 = self._hash.hexdigest() if self._hash is not None else None
        if sha256 is not None and not hmac.compare_digest(sha256, self._sha256 or ""):
            raise S3Error(
                "XAmzContentSHA256Mismatch",
                400,
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
                resource=self._resource,
            )
        self._digests.verify()
        self._verified = True


def _one(found: dict[str, list[str]], name: str) -> str:
    return (found.get(name) or [""])[0].strip()


def _decoded_length(found: dict[str, list[str]], resource: str) -> int | None:
    """x-amz-decoded-content-length; None when absent (the framing still ends the body)."""
    text = _one(found, "x-amz-decoded-content-length")
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise S3Error(
            "InvalidArgument",
            400,
            f"x-amz-decoded-content-length {text[:32]!r} is not a byte count",
            resource=resource,
        )
    return int(text)


def _declared_trailers(found: dict[str, list[str]]) -> list[str]:
    names = ",".join(found.get("x-amz-trailer", []))
    return [name.strip().lower() for name in names.split(",") if name.strip()]
