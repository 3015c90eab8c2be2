"""The body digests an S3 client may promise: Content-MD5 and x-amz-checksum-*.

Each is computed over the decoded payload as it streams past and compared once it
ends, so a corrupted upload is refused (BadDigest) before it is stored. CRC32,
SHA-1 and SHA-256 are computed with zlib/hashlib; CRC32C and CRC64NVME need a
native library this environment lacks (a pure-Python CRC would run at a few MB/s
on GiB objects), so their values are only checked for shape and then trusted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Protocol

from cloudfs.gateway.errors import S3Error

# algorithm -> digest size in bytes; the header is x-amz-checksum-<algorithm>
CHECKSUM_SIZES = {"crc32": 4, "crc32c": 4, "crc64nvme": 8, "sha1": 20, "sha256": 32}
VERIFIED = frozenset({"crc32", "sha1", "sha256"})


class Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...


@dataclass
class _Crc32:
    value: int = 0

    def update(self, data: bytes, /) -> None:
        self.value = zlib.crc32(data, self.value)

    def digest(self) -> bytes:
        return self.value.to_bytes(4, "big")


def new_digest(algorithm: str) -> Digest | None:
    """A running digest for ``algorithm``, or None where it cannot be computed here."""
    if algorithm == "crc32":
        return _Crc32()
    if algorithm in ("sha1", "sha256"):
        return hashlib.new(algorithm)
    return None


def decode_checksum(algorithm: str, value: str, *, resource: str = "") -> bytes:
    """The raw digest an ``x-amz-checksum-<algorithm>`` value (base64) stands for."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != CHECKSUM_SIZES[algorithm]:
        raise S3Error(
            "InvalidRequest",
            400,
            f"Value for x-amz-checksum-{algorithm} header is invalid.",
            resource=resource,
        )
    return raw


def decode_content_md5(value: str, *, resource: str = "") -> bytes:
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise S3Error(
            "InvalidDigest", 400, "The Content-MD5 you specified was invalid.", resource=resource
        )
    return raw


@dataclass
class Expectation:
    """One promised digest of the decoded body: what to compute, what it must equal.

    ``expected`` is None for a trailer checksum not yet received; ``digest`` is
    None for an algorithm this gateway cannot compute (then nothing is checked).
    """

    name: str  # "Content-MD5" or "x-amz-checksum-crc32" ...
    digest: Digest | None
    expected: bytes | None = None


@dataclass
class BodyDigests:
    """Every digest promised for one body, fed together as the body is read."""

    resource: str = ""
    expectations: list[Expectation] = field(default_factory=list)

    def update(self, data: bytes) -> None:
        for expectation in self.expectations:
            if expectation.digest is not None:
                expectation.digest.update(data)

    def expect_md5(self, value: str) -> None:
        self.expectations.append(
            Expectation(
                "Content-MD5",
                hashlib.md5(usedforsecurity=False),
                decode_content_md5(value, resource=self.resource),
            )
        )

    def expect_checksum(self, algorithm: str, value: str | None) -> Expectation:
        """``value`` None: the checksum comes in the trailer, set ``expected`` then."""
        expected = (
            None if value is None else decode_checksum(algorithm, value, resource=self.resource)
        )
        expectation = Expectation(f"x-amz-checksum-{algorithm}", new_digest(algorithm), expected)
        self.expectations.append(expectation)
        return expectation

    def verify(self) -> None:
        """At the end of the body: raise BadDigest for the first digest that differs."""
        for expectation in self.expectations:
            if expectation.digest is None or expectation.expected is None:
                continue
            if expectation.digest.digest() != expectation.expected:
                if expectation.name == "Content-MD5":
                    message = "The Content-MD5 you specified did not match what we received."
                else:
                    algorithm = expectation.name.removeprefix("x-amz-checksum-").upper()
                    message = (
                        f"The {algorithm} you specified did not match the calculated checksum."
                    )
                raise S3Error("BadDigest", 400, message, resource=self.resource)
