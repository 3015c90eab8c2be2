"""What a process reaching volumes without FUSE is told (``cloudfs://`` storage options,
the S3 gateway's command line) and the environment, checked once.

The tree service's address and token come from the storage options
(``meta_server="HOST:PORT"``, ``token=...``) or, as for ``cloudfs mount
grpc://...`` and ``cloudfs volume``, from ``$CLOUDFS_META_SERVER`` and
``$CLOUDFS_META_TOKEN``, so a training script needs no options at all on a
node where the mount's environment is set. TLS to the tree service: storage
options ``tls_ca`` (and ``tls_cert``, ``tls_key`` for mTLS) or
``$CLOUDFS_TLS_CA``, ``$CLOUDFS_TLS_CERT``, ``$CLOUDFS_TLS_KEY``. Blocks are read through a mount of
the volume on the same node when one serves them (``local_mount=False``: never;
``block_size`` must then be the mount's). Cache sizes are spelt as on the
command line (``"256M"``) or given as integers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cloudfs.config import MiB, S3Config
from cloudfs.errors import UsageError
from cloudfs.meta.client.tree_uri import TreeUri, parse_tree_uri
from cloudfs.meta.wire.volumes import validate_volume_name
from cloudfs.sizes import parse_size  # the command line's spelling of sizes
from cloudfs.tls import ClientTLS, client_tls
from cloudfs.tokens import Token

META_SERVER_ENV = "CLOUDFS_META_SERVER"
META_TOKEN_ENV = "CLOUDFS_META_TOKEN"
NO_SERVER = (
    f"cloudfs://VOLUME needs the tree service: storage option meta_server='HOST:PORT' "
    f"or ${META_SERVER_ENV} (cloudfs:///PATH under a mount on this node needs none)"
)

MIN_BLOCK = 64 * 1024
MAX_BLOCK = 64 * MiB


@dataclass(frozen=True, slots=True)
class ClientOptions:
    meta_server: str  # HOST:PORT of the tree service; "": none (mounts' paths only)
    token: Token | None
    # Must equal the mount's --block-size for the two to share block keys (4M by default).
    block_size: int = 4 * MiB
    memory_bytes: int = 256 * MiB  # the in-process block cache, per process
    s3: S3Config = S3Config()  # noqa: RUF009  # frozen: one shared default is fine
    timeout: float = 10.0  # per tree call (listing calls get 120 s, as in a mount)
    # Read through a mount of the volume on this node when one serves its blocks.
    local_mount: bool = True
    # Seconds a resolved directory is trusted without asking the tree (names.py); 0: never.
    meta_ttl: float = 1.0
    tls: ClientTLS | None = None  # TLS to the tree service (None: plaintext)

    def tree(self, volume: str) -> TreeUri:
        """The ``grpc://`` form of ``volume``: what a mount of it is named and salts its
        block keys with (``TreeUri.cache_id``)."""
        validate_volume_name(volume)
        if not self.meta_server:
            raise UsageError(NO_SERVER)
        return parse_tree_uri(f"grpc://{self.meta_server}/{volume}")


def client_options(
    meta_server: str | None = None,
    token: Token | None = None,
    block_size: int | str | None = None,
    memory_cache_size: int | str | None = None,
    s3_endpoint: str | None = None,
    s3_region: str | None = None,
    timeout: float | None = None,
    local_mount: bool = True,
    meta_ttl: float | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> ClientOptions:
    """Options from keyword arguments and the environment; ``UsageError`` if unusable."""
    server = meta_server or os.environ.get(META_SERVER_ENV) or ""
    if server:  # none: only cloudfs:///PATH (mounts on this node) works; tree() says why
        parse_tree_uri(f"grpc://{server}/probe")  # HOST:PORT, or a UsageError saying so
    block = _size(block_size, 4 * MiB, "block_size")
    if not MIN_BLOCK <= block <= MAX_BLOCK:
        raise UsageError("block_size must be between 64K and 64M (as the mount's --block-size)")
    return ClientOptions(
        meta_server=server,
        token=token or os.environ.get(META_TOKEN_ENV) or None,
        block_size=block,
        memory_bytes=_size(memory_cache_size, 256 * MiB, "memory_cache_size"),
        s3=S3Config(endpoint_url=s3_endpoint, region=s3_region),
        timeout=10.0 if timeout is None else float(timeout),
        local_mount=bool(local_mount),
        meta_ttl=_seconds(meta_ttl, 1.0, "meta_ttl"),
        tls=client_tls(tls_ca, tls_cert, tls_key),
    )


def _seconds(value: float | str | None, default: float, what: str) -> float:
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise UsageError(f"{what}: {value!r} is not a number of seconds") from None
    if not 0 <= seconds < float("inf"):
        raise UsageError(f"{what}: {value!r} must be 0 or more seconds")
    return seconds


def _size(value: int | str | None, default: int, what: str) -> int:
    if value is None:
        return default
    if isinstance(value, int):
        return value
    try:
        return parse_size(value)
    except UsageError as e:
        raise UsageError(f"{what}: {e}") from None
