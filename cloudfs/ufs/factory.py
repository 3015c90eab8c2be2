"""Turn a UFS URI from the command line into an ObjectStore.

The CLI calls :func:`open_store` once; a bad URI is a ``UsageError`` (one line,
exit status 2) raised before anything touches the network. :func:`store_id`
names the store's cache directory, so it must be stable across runs and
insensitive to spelling differences that address the same data
(``s3://b/x/`` and ``s3://b/x``).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from cloudfs.config import S3Config
from cloudfs.errors import UsageError
from cloudfs.ufs.interface import ObjectStore
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.s3 import S3ObjectStore

# Loose on purpose: legacy buckets allow upper case and "_", S3-compatibles more.
_BUCKET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")


@dataclass(frozen=True, slots=True)
class ParsedUri:
    """A validated UFS URI: ``scheme`` is "file" (``location`` = absolute dir) or "s3"."""

    scheme: str
    location: str  # file: the absolute directory; s3: the bucket
    prefix: str = ""  # s3 only: key prefix, no leading/trailing "/"

    @property
    def normalized(self) -> str:
        if self.scheme == "file":
            return f"file://{self.location}"
        return f"s3://{self.location}/{self.prefix}" if self.prefix else f"s3://{self.location}"


def parse_uri(uri: str) -> ParsedUri:
    """Validate ``uri``; raises ``UsageError`` naming what is wrong."""
    if "://" not in uri:
        raise UsageError(
            f"not a storage URI: '{uri}' (expected s3://bucket[/prefix] or file:///abs/dir)"
        )
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if parts.query or parts.fragment:
        raise UsageError(f"storage URI must not have a query or fragment: '{uri}'")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise UsageError(f"file URI must be file:///absolute/dir, got host in '{uri}'")
        if not parts.path.startswith("/"):
            raise UsageError(f"file URI needs an absolute path: '{uri}'")
        return ParsedUri("file", os.path.normpath(parts.path))
    if scheme == "s3":
        bucket = parts.netloc
        if not bucket:
            raise UsageError(f"S3 URI has no bucket: '{uri}' (expected s3://bucket[/prefix])")
        if not _BUCKET_RE.match(bucket):
            raise UsageError(f"invalid S3 bucket name '{bucket}' in '{uri}'")
        return ParsedUri("s3", bucket, parts.path.strip("/"))
    if scheme == "hdfs":
        raise UsageError(f"hdfs:// is not supported yet: '{uri}'")
    raise UsageError(f"unsupported storage scheme '{parts.scheme}://' in '{uri}' (use s3 or file)")


def validate_uri(uri: str) -> None:
    """Raise ``UsageError`` if ``uri`` cannot name a store (the CLI checks before mounting)."""
    parse_uri(uri)


def open_store(uri: str, s3: S3Config) -> ObjectStore:
    """The ObjectStore for ``uri``; nothing is contacted until the first call."""
    parsed = parse_uri(uri)
    if parsed.scheme == "file":
        return LocalObjectStore(parsed.location)
    return S3ObjectStore(parsed.location, parsed.prefix, s3)


def configured_endpoint(s3: S3Config) -> str | None:
    """The S3 endpoint a mount will use, as far as options and environment say."""
    return (
        s3.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )


def store_id(uri: str, endpoint_url: str | None = None) -> str:
    """A 16-hex-digit id of the store, for cache directory names.

    The same bucket name on two endpoints is two different stores: pass the
    endpoint (``S3Config.endpoint_url``) when one is configured.
    """
    text = parse_uri(uri).normalized
    if endpoint_url:
        text += "\n" + endpoint_url.rstrip("/").lower()
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]
