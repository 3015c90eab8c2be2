"""Request and Response: one S3 call as the operations see it, apart from HTTP.

The server (``server.py``) builds a ``Request`` once the call has authenticated
(bucket and key URL-decoded from a path-style URL, the query parsed, the body
already the decoded payload of ``payload.open_body``) and writes the
``Response`` an operation returns: a small body as bytes, an object's bytes as
an iterator of blocks with their total length, so a GiB is never held.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from cloudfs.gateway.errors import S3Error

XML = "application/xml"


class Body(Protocol):
    """A request's decoded payload: read until ``b""``."""

    def read(self, size: int = -1, /) -> bytes: ...


class Headers(Mapping[str, str]):
    """Request headers, looked up without regard to case (repeated ones joined by ",")."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._items: dict[str, tuple[str, str]] = {}
        for name, value in pairs:
            lower = name.lower()
            if lower in self._items:
                value = f"{self._items[lower][1]},{value}"
            self._items[lower] = (name, value)

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()][1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return (original for original, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class Request:
    method: str
    bucket: str  # "" for the service (ListBuckets)
    key: str  # "" for a bucket's own calls
    query: dict[str, str]  # the first value of each parameter ("" when it has none)
    headers: Headers
    body: Body
    content_length: int | None
    access_key: str = ""
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16].upper())

    @property
    def resource(self) -> str:
        return f"/{self.bucket}/{self.key}" if self.key else f"/{self.bucket}"

    def read_body(self, limit: int) -> bytes:
        """The whole (small) body: an XML document; ``MaxMessageLengthExceeded`` past ``limit``."""
        data = self.body.read(limit + 1)
        if len(data) > limit:
            raise S3Error("MaxMessageLengthExceeded", 400, "Your request was too big.")
        return data


@dataclass
class Response:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Iterator[bytes] = b""
    length: int | None = None  # of an iterator body (Content-Length); of the object for HEAD
    bytes_out: int = 0  # object bytes sent (metrics), filled by the server


def xml_response(document: bytes, status: int = 200) -> Response:
    return Response(status, {"Content-Type": XML}, document)
