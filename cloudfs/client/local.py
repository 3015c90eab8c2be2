"""``cloudfs:///ABSOLUTE/PATH``: a path under a CloudFS mount on this node, without FUSE.

The deepest ``fuse.cloudfs`` mount whose mount point lexically contains the
path is asked over its control socket what it is (``describe``:
``cloudfs.control.describe_ops``); the handle built from the answer talks to
the mount's tree (an embedded mount's own tree on its 0600 UNIX socket, or a
``grpc://`` mount's tree service and volume), reads the mount's UFS, and keys
its cached blocks with the mount's salt and block size. The path is matched
as written (normalized, symlinks not resolved): resolving it would send
lookups through the FUSE mount this module exists to avoid.

Errors: no mount holds the path -> ``NotFound``; the mount is another
user's (its sockets are 0600) -> ``AccessDenied``; the mount process does
not answer -> ENOTCONN, what FUSE says of a dead mount.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass

from cloudfs import mountinfo
from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.client.blocks import BlockFetcher
from cloudfs.client.local_mount import LocalMount
from cloudfs.client.options import ClientOptions
from cloudfs.client.volume import Parts, VolumeHandle
from cloudfs.config import S3Config
from cloudfs.control import client as control
from cloudfs.control import paths
from cloudfs.errors import (
    AccessDenied,
    FsError,
    InvalidArgument,
    NotFound,
    StartupError,
    UsageError,
)
from cloudfs.lib.jsonlines import Message
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.metrics import Metrics
from cloudfs.tls import ClientTLS, load_client_tls
from cloudfs.tokens import Token, TokenFile
from cloudfs.ufs.factory import open_store
from cloudfs.ufs.metered import MeteredObjectStore

FS_TYPE = "fuse.cloudfs"
DESCRIBE_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class MountFacts:
    """What ``describe`` says of a mount (see ``describe_ops``)."""

    ufs: str
    salt: str
    block_size: int
    tree_address: str  # "unix:PATH" or "HOST:PORT"
    volume: str
    token: Token | None = None
    tls: ClientTLS | None = None
    s3_endpoint: str | None = None
    s3_region: str | None = None
    read_only: bool = False

    @classmethod
    def from_message(cls, message: Message) -> MountFacts:
        try:
            return cls(
                ufs=str(message["ufs"]),
                salt=str(message["salt"]),
                block_size=int(message["block_size"]),
                tree_address=str(message["tree_address"]),
                volume=str(message["volume"]),
                token=_token(message),
                tls=load_client_tls(
                    message.get("tls_ca"), message.get("tls_cert"), message.get("tls_key")
                ),
                s3_endpoint=message.get("s3_endpoint") or None,
                s3_region=message.get("s3_region") or None,
                read_only=bool(message.get("read_only", False)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgument(f"the mount's description lacks {e}") from None
        except UsageError as e:  # its token or TLS files, unreadable to this process
            raise AccessDenied(f"the mount's {e}") from None


def _token(message: Message) -> Token | None:
    """The mount's token: its file where this process can read it (followed as it
    rotates; another container may not see it), else its value now."""
    if message.get("token_file"):
        try:
            return TokenFile(str(message["token_file"]))
        except UsageError:
            pass
    return message.get("token") or None


def split_mount_path(path: str, mounts: Iterable[mountinfo.Mount]) -> tuple[mountinfo.Mount, Parts]:
    """The deepest CloudFS mount holding absolute ``path``, and the names below it."""
    norm = os.path.normpath(path)
    if not norm.startswith("/"):
        raise InvalidArgument(f"{path!r}: cloudfs:/// names an absolute path")
    norm = "/" + norm.lstrip("/")  # normpath keeps a leading "//"
    best: mountinfo.Mount | None = None
    for mount in mounts:  # in mount order: the last of one mount point is the topmost
        mnt = mount.mount_point
        if mount.fs_type != FS_TYPE:
            continue
        inside = norm == mnt or norm.startswith(mnt.rstrip("/") + "/")
        if inside and (best is None or len(mnt) >= len(best.mount_point)):
            best = mount
    if best is None:
        raise NotFound(f"{path} is not under a CloudFS mount on this node")
    rest = norm[len(best.mount_point) :]
    return best, tuple(os.fsencode(p) for p in rest.split("/") if p)


def mount_owner(mount: mountinfo.Mount) -> int | None:
    """The uid that mounted (FUSE's ``user_id=`` super option), if the kernel says."""
    for option in mount.super_options:
        key, _, value = option.partition("=")
        if key == "user_id" and value.isdigit():
            return int(value)
    return None


def describe(mount: mountinfo.Mount, timeout: float = DESCRIBE_TIMEOUT) -> MountFacts:
    """Ask the mount over its control socket what it is."""
    mountpoint = mount.mount_point
    owner = mount_owner(mount)
    theirs = owner is not None and owner != os.geteuid()
    if not paths.control_socket(mountpoint).exists() and theirs:
        raise AccessDenied(f"{mountpoint} is mounted by uid {owner}: only that user reaches it")
    try:
        answer = control.result(mountpoint, {"op": "describe"}, timeout=timeout)
    except PermissionError:
        raise AccessDenied(f"{mountpoint}: its control socket is another user's") from None
    except StartupError as e:
        raise FsError(str(e), errno=errno.ENOTCONN) from None
    return MountFacts.from_message(answer)


def open_mount(mount: mountinfo.Mount, options: ClientOptions, metrics: Metrics) -> VolumeHandle:
    """A handle on the mount's tree and data, keyed as the mount keys its blocks."""
    facts = describe(mount, options.timeout)
    meta = GrpcMeta(
        facts.tree_address, facts.volume, token=facts.token, timeout=options.timeout,
        tls=facts.tls,
    )  # fmt: skip
    s3 = S3Config(
        endpoint_url=facts.s3_endpoint or options.s3.endpoint_url,
        region=facts.s3_region or options.s3.region,
    )
    store = MeteredObjectStore(open_store(facts.ufs, s3), metrics)
    memory = MemoryBlockCache(options.memory_bytes, metrics)
    local = None
    if options.local_mount:  # this mount's own block socket: its cache is ours
        socket = paths.local_blocks_socket(facts.salt, mount.mount_point)
        local = LocalMount(facts.salt, facts.ufs, facts.block_size, metrics, find=lambda: [socket])
    blocks = BlockFetcher(store, memory, facts.salt, facts.block_size, local)
    return VolumeHandle.from_parts(
        mount.mount_point, facts.ufs, meta, store, blocks, options.meta_ttl
    )
