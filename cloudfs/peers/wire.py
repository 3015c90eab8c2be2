"""What both ends of a block transfer agree on: plain HTTP/1.1, one GET per block.

    GET /v1/block?store_uri=..&key=..&etag=..&object_size=..&block_size=..&index=..[&fill=1]
    Authorization: Bearer <token>          (when the worker has one)

200: the body is exactly the block (empty for ``fill=1``), with ``X-Cloudfs-Source``
(memory, disk, origin) and ``X-Cloudfs-Crc32`` (zlib.crc32 of the body, decimal).
An answer about the block carries ``X-Cloudfs-Errno``: the worker itself answered,
alive, and only this block is fetched elsewhere. A status without it (401 for a
token refused, 404/405 for a path or method that is not ours, a proxy's 5xx) says
the member is not one to ask for now.

While the worker waits for the block (an object-store GET for a cold one, or a
free serving slot) it sends an interim ``100 Continue`` every ``TICK_SECONDS``
after the first (``http.client`` reads past any number of them): the caller's
per-read socket timeout (2 s by default) then tells a member that stopped
answering from one still fetching behind a slow origin, which it waits for up
to ``CALL_CAP_SECONDS``.

Why HTTP and not gRPC: benchmarks/peer_transport.py measured one cached 4 MiB
block on loopback at 6.7 ms with gRPC unary calls and 1.5 ms with HTTP/1.1
keep-alive (4.0 ms streamed gRPC, 4.0 ms a framed socket protocol; 2.7 GiB/s
against 0.9 GiB/s with 8 callers), with nothing but the standard library.
"""

from __future__ import annotations

import errno as E
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, quote, urlencode

__all__ = [
    "BLOCK_PATH",
    "CRC_HEADER",
    "ERRNO_HEADER",
    "MAX_BLOCK_BYTES",
    "SOURCE_HEADER",
    "Query",
    "status_of",
]

BLOCK_PATH = "/v1/block"
TICK_SECONDS = 0.5  # the worker's "still fetching" interval: well under any read timeout
CALL_CAP_SECONDS = 30.0  # the longest a caller waits for one block, ticks or not
SOURCE_HEADER = "X-Cloudfs-Source"
CRC_HEADER = "X-Cloudfs-Crc32"
ERRNO_HEADER = "X-Cloudfs-Errno"
SOURCES = ("memory", "disk", "origin")

MiB = 1024 * 1024
MAX_BLOCK_BYTES = 64 * MiB  # the largest --block-size

# A worker's own answers. EIO (the object store failing) is 503: a GET changes
# nothing, so "try elsewhere" is always safe.
_STATUS = {
    E.ENOENT: HTTPStatus.NOT_FOUND,
    E.ESTALE: HTTPStatus.PRECONDITION_FAILED,
    E.EINVAL: HTTPStatus.BAD_REQUEST,
    E.EILSEQ: HTTPStatus.BAD_REQUEST,
    E.EACCES: HTTPStatus.FORBIDDEN,
    E.EPERM: HTTPStatus.FORBIDDEN,
    E.EISDIR: HTTPStatus.CONFLICT,
    E.EIO: HTTPStatus.SERVICE_UNAVAILABLE,
}


def status_of(errno: int) -> HTTPStatus:
    """The status a worker answers an ``FsError`` of ``errno`` with (503 if unknown)."""
    return _STATUS.get(errno, HTTPStatus.SERVICE_UNAVAILABLE)


_FIELDS = ("store_uri", "key", "etag", "object_size", "block_size", "index")
_NUMBERS = ("object_size", "block_size", "index")


@dataclass(frozen=True, slots=True)
class Query:
    """One block asked for: the query string of ``BLOCK_PATH``, as plain values."""

    store_uri: str
    key: str
    etag: str
    object_size: int
    block_size: int
    index: int
    fill: bool = False

    def target(self) -> str:
        """The request target: ``quote`` (not ``quote_plus``), so a '+' in a key is
        sent as %2B and a space as %20, and both come back as they were."""
        fields: dict[str, str | int] = {f: getattr(self, f) for f in _FIELDS}
        if self.fill:
            fields["fill"] = 1
        return f"{BLOCK_PATH}?{urlencode(fields, quote_via=quote, safe='')}"

    @classmethod
    def parse(cls, query: str) -> Query:
        """The block a query string names; ``ValueError`` for a field missing, repeated,
        not UTF-8 or not a number (the worker answers 400 with EINVAL)."""
        values: Mapping[str, list[str]] = parse_qs(
            query, keep_blank_values=True, strict_parsing=bool(query), errors="strict"
        )
        one: dict[str, str] = {}
        for name in (*_FIELDS, "fill"):
            got = values.get(name, [])
            if len(got) > 1 or (not got and name != "fill"):
                raise ValueError(f"{name} must be given once")
            if got:
                one[name] = got[0]
        for name in _NUMBERS:
            if not one[name].isdigit():
                raise ValueError(f"{name} must be a number, not {one[name]!r}")
        return cls(
            store_uri=one["store_uri"],
            key=one["key"],
            etag=one["etag"],
            object_size=int(one["object_size"]),
            block_size=int(one["block_size"]),
            index=int(one["index"]),
            fill=one.get("fill", "0") not in ("", "0"),
        )
