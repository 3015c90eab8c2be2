"""Which UFS a volume is, from its id and context; its secrets split by use.

A volume's URI is its context's ``uri`` (set by CreateVolume, or by a static
PersistentVolume's ``volumeAttributes``), or else the volume id itself when it
is a URI (``volumeHandle: s3://bucket/prefix``). Anything else is an unknown
volume (NOT_FOUND).
"""

from __future__ import annotations

import logging
import os

from cloudfs.errors import FsError, UsageError
from cloudfs.k8s.csi_names import (
    CACHE_TOKEN_KEYS,
    CONTEXT_URI,
    ENV_KEY,
    TOKEN_KEYS,
    check_volume_uri,
)
from cloudfs.meta.client.tree_uri import is_tree_uri, parse_tree_uri
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs_csi.errors import InvalidArgument, NotFound, from_cloudfs
from cloudfs_csi.tls import ALL_SECRET_KEYS as TLS_KEYS
from cloudfs_csi.tls import TlsFiles, client_tls

log = logging.getLogger(__name__)

TREE_TIMEOUT = 15.0
TLS_HINT = (
    "the mount and this check trust the CA of the node-stage secret's ca.crt, else the "
    "node plugin's --tls-ca-file (mutual TLS: tls.crt and tls.key, else --tls-cert-file "
    "and --tls-key-file)"
)


def volume_uri(volume_id: str, context: dict[str, str]) -> str:
    uri = context.get(CONTEXT_URI) or (volume_id if "://" in volume_id else "")
    if not uri:
        raise NotFound(f"unknown volume {volume_id!r}: its volume context names no uri")
    try:
        check_volume_uri(uri)
    except (UsageError, FsError) as exc:
        raise InvalidArgument(f"volume {volume_id!r}: {exc}") from None
    return uri


def split_secrets(secrets: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """(environment of the FUSE process, tree-service token) from a volume's secrets.

    The tokens (``token``, ``cacheToken``) and the TLS material (``tls.py``) are
    not in the environment: they reach the mount as 0600 files.
    """
    token = next((secrets[k] for k in TOKEN_KEYS if secrets.get(k)), None)
    tokens = set(TOKEN_KEYS) | set(CACHE_TOKEN_KEYS) | TLS_KEYS
    env = {k: v for k, v in secrets.items() if ENV_KEY.match(k) and k not in tokens}
    ignored = sorted(set(secrets) - set(env) - tokens)
    if ignored:
        log.warning(
            "ignoring secret keys %s (only token, cacheToken, ca.crt, tls.crt, tls.key, "
            "AWS_*, HADOOP_* are used)",
            ignored,
        )
    return env, token


def cache_token(secrets: dict[str, str]) -> str | None:
    """The cache group's token from a volume's secrets (``cacheToken``), if any."""
    return next((secrets[k] for k in CACHE_TOKEN_KEYS if secrets.get(k)), None)


def check_exists(volume_id: str, uri: str, token: str | None, tls: TlsFiles | None = None) -> None:
    """NOT_FOUND when the volume's tree-service volume or local directory does not exist.

    ``tls``: the files the volume's mount gets (``--tls-ca``...), so the check reaches
    the tree service as the mount will. S3 and HDFS volumes are not looked at here:
    their mount reports what fails.
    """
    if is_tree_uri(uri):
        tree = parse_tree_uri(uri)
        client_tls_ = client_tls(tls or TlsFiles(), f"volume {volume_id!r}")
        client = VolumeClient(tree.address, token=token, timeout=TREE_TIMEOUT, tls=client_tls_)
        try:
            client.get(tree.volume)
        except FsError as exc:
            raise from_cloudfs(exc, f"volume {volume_id!r}", tls_hint=TLS_HINT) from None
        finally:
            client.close()
    elif uri.startswith("file://") and not os.path.isdir(uri[len("file://") :]):
        raise NotFound(f"volume {volume_id!r}: {uri} is not a directory")
