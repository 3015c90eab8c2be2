"""A volume's cache group: which cache workers its mounts ask for blocks before the UFS.

A volume names its group in its context (StorageClass parameters copied there
by CreateVolume, or a static PV's ``volumeAttributes``):

    cacheGroup   NAME: a group whose members (``cloudfs cache serve --group NAME``)
                 register with the volume's tree service -> ``--cache-group NAME``;
                 only for tree-service volumes (``grpc://``)
    cachePeers   HOST:PORT,HOST:PORT...: a static list of workers -> ``--cache-peers``

or in its mount options (``cache_group=NAME``, ``cache_peers=A+B``,
``cache_group_serve=HOST:PORT``), not both. The group's token comes from the
node-stage secret (``cacheToken``) or the node plugin's ``--cache-token-file``
and reaches the mount as ``--cache-token-file``, never its argv or the log.
"""

from __future__ import annotations

from dataclasses import dataclass

from cloudfs.errors import FsError, UsageError
from cloudfs.k8s.csi_names import CONTEXT_GROUP, CONTEXT_PEERS
from cloudfs.lib.endpoints import parse_host_port, parse_members
from cloudfs.meta.client.tree_uri import is_tree_uri
from cloudfs.meta.wire.groups import validate_group_name
from cloudfs_csi.errors import InvalidArgument

CONTEXT_KEYS = (CONTEXT_GROUP, CONTEXT_PEERS)
GROUP_OPTIONS = frozenset({"cache_group", "cache_peers"})


def validate_group(name: str, what: str = CONTEXT_GROUP) -> str:
    """A group name as the tree service takes it (``validate_group_name``)."""
    try:
        validate_group_name(name)
    except FsError as exc:
        raise InvalidArgument(f"{what}: {exc}") from None
    return name


def validate_peers(text: str, what: str = CONTEXT_PEERS) -> tuple[str, ...]:
    """``HOST:PORT,HOST:PORT...`` (or joined with ``+``) as the members, each once."""
    try:
        return parse_members(text, what)
    except UsageError as exc:
        raise InvalidArgument(f"{exc} (a list HOST:PORT,HOST:PORT...)") from None


def check_option(name: str, value: str) -> None:
    """A group mount option's value; the message names the option, never the value."""
    try:
        if name == "cache_group":
            validate_group(value)
        elif name == "cache_peers":
            parse_members(value, name)
        elif name == "cache_group_serve":
            parse_host_port(value, name)
    except (InvalidArgument, UsageError):
        forms = {"cache_group": "a group name", "cache_peers": "HOST:PORT[+HOST:PORT...]"}
        raise InvalidArgument(
            f"mount option {name!r} wants {forms.get(name, 'HOST:PORT')}"
        ) from None


@dataclass(frozen=True, slots=True)
class CacheGroup:
    """The group flags of a volume's ``cloudfs mount``, from its context."""

    group: str | None = None
    peers: tuple[str, ...] = ()

    def args(self) -> list[str]:
        if self.group:
            return ["--cache-group", self.group]
        if self.peers:
            return ["--cache-peers", ",".join(self.peers)]
        return []


def from_parameters(params: dict[str, str]) -> CacheGroup:
    """The group of a volume context or StorageClass parameters (its URI not checked)."""
    group = params.get(CONTEXT_GROUP, "")
    peers = params.get(CONTEXT_PEERS, "")
    if group and peers:
        raise InvalidArgument(
            f"give {CONTEXT_GROUP} (members registered with the tree service) or "
            f"{CONTEXT_PEERS} (a fixed list), not both"
        )
    return CacheGroup(
        group=validate_group(group) if group else None,
        peers=validate_peers(peers) if peers else (),
    )


def for_volume(volume_id: str, uri: str, context: dict[str, str], options: list[str]) -> CacheGroup:
    """The group of a volume being staged, checked against its URI and mount options."""
    group = from_parameters(context)
    named = {item.partition("=")[0] for item in options} & (GROUP_OPTIONS | {"cache_group_serve"})
    if (group.group or group.peers) and named & GROUP_OPTIONS:
        raise InvalidArgument(
            f"volume {volume_id!r}: the cache group is given both in the volume's attributes "
            f"({', '.join(CONTEXT_KEYS)}) and in its mount options; keep one"
        )
    if (group.group or named & {"cache_group", "cache_group_serve"}) and not is_tree_uri(uri):
        raise InvalidArgument(
            f"volume {volume_id!r}: a cache group found through the tree service needs a "
            f"tree-service volume (grpc://...), not {uri.partition('://')[0]}://; "
            f"use {CONTEXT_PEERS} for a fixed list of workers"
        )
    if "cache_group_serve" in named and not (group.group or "cache_group" in named):
        raise InvalidArgument(
            f"volume {volume_id!r}: mount option 'cache_group_serve' needs a cache group "
            f"({CONTEXT_GROUP} or cache_group=NAME)"
        )
    return group


def check_serve_tls(volume_id: str, options: list[str], *, has_ca: bool) -> None:
    """A mount that serves its cache to the group (``cache_group_serve``) and reaches the
    members over TLS (it has a CA: the node-stage secret's or the node plugin's) must
    serve TLS too: ``cache_group_serve_cert`` and ``cache_group_serve_key`` (files the
    mounter container reads, a certificate naming the served address). Said here, as
    INVALID_ARGUMENT, rather than by the mount failing to start."""
    named = {item.partition("=")[0] for item in options}
    pair = {"cache_group_serve_cert", "cache_group_serve_key"}
    if "cache_group_serve" in named and has_ca and not pair <= named:
        raise InvalidArgument(
            f"volume {volume_id!r}: mount option 'cache_group_serve' with TLS (the volume's "
            "mounts trust a CA): the group's members speak TLS, so give the mount options "
            "cache_group_serve_cert and cache_group_serve_key too"
        )


def uses_group(group: CacheGroup, options: list[str]) -> bool:
    named = {item.partition("=")[0] for item in options}
    return bool(group.group or group.peers or named & GROUP_OPTIONS)
