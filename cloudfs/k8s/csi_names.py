"""The CSI driver's names that other Kubernetes parts must spell the same way.

The driver (``csi-driver/``), the scheduler extender (``pod_volumes.py``) and the
sidecar webhook (``cloudfs/sidecar``) all read a CloudFS volume from a PV's
``spec.csi`` (or a pod's inline ``csi``) and its secret; this is the one copy of
those names:

    driver          csi.cloudfs.io
    volume context  uri, cacheGroup, cachePeers
    secret keys     token (or CLOUDFS_META_TOKEN): the tree-service token
                    cacheToken (or CLOUDFS_CACHE_TOKEN): the cache group's token
                    ca.crt (tlsCa), tls.crt (tlsCert), tls.key (tlsKey): TLS material
                    AWS_*, HADOOP_*, ARROW_*, CLOUDFS_*: the mount's environment
"""

from __future__ import annotations

import re

from cloudfs.meta.client.tree_uri import is_tree_uri, parse_tree_uri
from cloudfs.ufs.factory import validate_uri

DRIVER_NAME = "csi.cloudfs.io"

CONTEXT_URI = "uri"
CONTEXT_GROUP = "cacheGroup"
CONTEXT_PEERS = "cachePeers"

TOKEN_KEYS = ("token", "CLOUDFS_META_TOKEN")
CACHE_TOKEN_KEYS = ("cacheToken", "CLOUDFS_CACHE_TOKEN")
TLS_CA_KEYS = ("ca.crt", "tlsCa")
TLS_CERT_KEYS = ("tls.crt", "tlsCert")
TLS_KEY_KEYS = ("tls.key", "tlsKey")
TLS_KEYS = frozenset((*TLS_CA_KEYS, *TLS_CERT_KEYS, *TLS_KEY_KEYS))
FILE_KEYS = frozenset((*TOKEN_KEYS, *CACHE_TOKEN_KEYS, *TLS_KEYS))  # given to a mount as files
ENV_KEY = re.compile(r"^(AWS|HADOOP|ARROW|CLOUDFS)_[A-Z0-9_]+$")  # given as its environment


def env_keys(keys: object) -> list[str]:
    """The keys of a secret that become the mount's environment (never a file key)."""
    if not isinstance(keys, (list, tuple, set, frozenset, dict)):
        return []
    return sorted(k for k in keys if isinstance(k, str) and ENV_KEY.match(k) and k not in FILE_KEYS)


def check_volume_uri(uri: str) -> None:
    """A volume's ``uri``: a tree-service volume (``grpc://...``) or a UFS URI the mount
    can open; ``UsageError``/``FsError`` says what is wrong."""
    if is_tree_uri(uri):
        parse_tree_uri(uri)
    else:
        validate_uri(uri)
