"""Turn a UFS URI from the command line into an ObjectStore.

The CLI calls :func:`open_store` once; a bad URI is a ``UsageError`` (one line,
exit status 2) raised before anything touches the network. :func:`store_id`
names the store's cache directory, so it must be stable across runs and
insensitive to spelling differences that address the same data
(``s3://b/x/`` and ``s3://b/x``).

``hdfs://namenode[:port]/dir`` opens ``hdfs.HdfsObjectStore``; pyarrow (the
``hdfs`` extra) is imported only then, so other schemes work without it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from cloudfs.config import S3Config
from cloudfs.errors import StartupError, UsageError
from cloudfs.ufs.interface import ObjectStore
from cloudfs.ufs.local import LocalObjectStore
from cloudfs.ufs.s3 import S3ObjectStore

# Loose on purpose: legacy buckets allow upper case and "_", S3-compatibles more.
_BUCKET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
# A host name, an IPv4 address, or an HA nameservice id (hdfs://mycluster/dir).
_HOST_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9._-]{0,252}[A-Za-z0-9_])?$")


@dataclass(frozen=True, slots=True)
class ParsedUri:
    """A validated UFS URI: ``scheme`` is "file" (``location`` = absolute dir), "s3" or "hdfs"."""

    scheme: str
    location: str  # file: the absolute directory; s3: the bucket; hdfs: the namenode host
    prefix: str = ""  # s3: key prefix; hdfs: directory; no leading/trailing "/"
    port: int = 0  # hdfs only; 0: from the Hadoop configuration (HA nameservice)

    @property
    def normalized(self) -> str:
        if self.scheme == "file":
            return f"file://{self.location}"
        if self.scheme == "hdfs":
            host = f"[{self.location}]" if ":" in self.location else self.location
            where = f"{host}:{self.port}" if self.port else host
            return f"hdfs://{where}/{self.prefix}" if self.prefix else f"hdfs://{where}"
        return f"s3://{self.location}/{self.prefix}" if self.prefix else f"s3://{self.location}"


def parse_uri(uri: str) -> ParsedUri:
    """Validate ``uri``; raises ``UsageError`` naming what is wrong."""
    if "://" not in uri:
        raise UsageError(
            f"not a storage URI: '{uri}' "
            "(expected s3://bucket[/prefix], hdfs://namenode:port/dir or file:///abs/dir)"
        )
    try:
        parts = urlsplit(uri)
    except ValueError as err:  # a bracketed host that is no IPv6 address
        raise UsageError(f"invalid storage URI '{uri}': {err}") from None
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
        return _parse_hdfs(uri, parts.netloc, parts.path)
    raise UsageError(
        f"unsupported storage scheme '{parts.scheme}://' in '{uri}' (use s3, hdfs or file)"
    )


def _parse_hdfs(uri: str, netloc: str, path: str) -> ParsedUri:
    """``hdfs://host[:port][/dir]``: the namenode (or HA nameservice) and a directory."""
    if "@" in netloc:
        raise UsageError(f"HDFS URI must not name a user: '{uri}' (set HADOOP_USER_NAME)")
    host, port_text = netloc, ""
    if netloc.startswith("["):  # [IPv6]:port
        host, _, rest = netloc[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise UsageError(f"invalid HDFS namenode address '{netloc}' in '{uri}'")
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise UsageError(f"invalid HDFS namenode address '{netloc}' in '{uri}'") from None
    else:
        host, _, port_text = netloc.partition(":")
        if not host:
            raise UsageError(
                f"HDFS URI has no namenode: '{uri}' (expected hdfs://namenode:port/dir)"
            )
        if not _HOST_RE.match(host):
            raise UsageError(f"invalid HDFS namenode host '{host}' in '{uri}'")
    port = 0
    if port_text or netloc.endswith(":"):
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise UsageError(f"invalid HDFS namenode port '{port_text}' in '{uri}'")
        port = int(port_text)
    prefix = posixpath.normpath("/" + path).strip("/")
    return ParsedUri("hdfs", host.lower(), prefix, port)


def validate_uri(uri: str) -> None:
    """Raise ``UsageError`` if ``uri`` cannot name a store (the CLI checks before mounting)."""
    parse_uri(uri)


def open_store(uri: str, s3: S3Config) -> ObjectStore:
    """The ObjectStore for ``uri``; nothing is contacted until the first call.

    hdfs:// starts the JVM here (in the mount process, after it forked): a
    ``StartupError`` says what is missing when pyarrow, Java or libhdfs is.
    """
    parsed = parse_uri(uri)
    if parsed.scheme == "file":
        return LocalObjectStore(parsed.location)
    if parsed.scheme == "hdfs":
        return _open_hdfs(parsed)
    return S3ObjectStore(parsed.location, parsed.prefix, s3)


def _open_hdfs(parsed: ParsedUri) -> ObjectStore:
    try:
        from cloudfs.ufs.hdfs import HdfsObjectStore
    except ModuleNotFoundError as err:
        if (err.name or "").partition(".")[0] != "pyarrow":
            raise
        raise StartupError(
            "hdfs:// needs pyarrow: pip install 'cloudfs[hdfs]' (and Java with libhdfs)"
        ) from None
    return HdfsObjectStore.connect(parsed.location, parsed.port, parsed.prefix)


def store_id(uri: str, endpoint_url: str | None = None) -> str:
    """A 16-hex-digit id of the store, for cache directory names.

    The same bucket name on two endpoints is two different stores: pass the
    endpoint (``S3Config.endpoint_url``) when one is configured.
    """
    text = parse_uri(uri).normalized
    if endpoint_url:
        text += "\n" + endpoint_url.rstrip("/").lower()
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]
