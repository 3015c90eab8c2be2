"""The mount's side of ``describe``: what a process needs to reach the mount without FUSE.

``cloudfs:///MOUNTPOINT/path`` (``cloudfs.client.local``) asks the mount over
its control socket (mode 0600: the mount's user only) and builds the same
view the mount has: the tree (``tree_address``, ``volume``: the mount's own
tree on its UNIX socket, or for a ``grpc://`` mount its tree service and
volume, with the mount's token), the UFS the bytes are in (``ufs``, with the
S3 endpoint and region the mount uses; credentials come from the caller's
environment, never from here), and how the mount keys its cached blocks
(``salt``: ``MountConfig.store_id``; ``block_size``), so a block cached by
the caller means the same bytes as the mount's. ``read_only``: changes are
refused (the tree socket refuses them too).
"""

from __future__ import annotations

from cloudfs.config import MountConfig
from cloudfs.control.server import Emit, Handler
from cloudfs.lib.jsonlines import Message
from cloudfs.meta.client.tree_uri import is_tree_uri, parse_tree_uri
from cloudfs.meta.service.single import LOCAL_VOLUME
from cloudfs.tokens import TokenFile, token_source


class DescribeControl:
    def __init__(self, description: Message) -> None:
        self._description = description

    def handlers(self) -> dict[str, Handler]:
        return {"describe": self.describe}

    async def describe(self, request: Message, emit: Emit) -> Message:
        return dict(self._description)


def describe_mount(config: MountConfig, data_uri: str, tree_socket: str) -> Message:
    """The answer of ``describe``; ``data_uri``: the UFS of the bytes (a ``grpc://``
    mount's volume's), ``tree_socket``: where an embedded mount serves its tree."""
    description: Message = {
        "mountpoint": config.mountpoint,
        "ufs": data_uri,
        "salt": config.store_id,
        "block_size": config.cache.block_size,
        "s3_endpoint": config.s3.effective_endpoint() if data_uri.startswith("s3:") else None,
        "s3_region": config.s3.region,
        "read_only": config.read_only,
    }
    if is_tree_uri(config.ufs_uri):
        tree = parse_tree_uri(config.ufs_uri)
        description.update(tree_address=tree.address, volume=tree.volume)
        token = token_source(config.tree_token)
        if token is not None:
            description["token"] = token.current()
        if isinstance(token, TokenFile):  # a process that can read it follows its rotation
            description["token_file"] = token.path
        if config.tls is not None:
            description.update(
                tls_ca=config.tls.ca_file, tls_cert=config.tls.cert_file,
                tls_key=config.tls.key_file,
            )  # fmt: skip
    else:
        description.update(tree_address=f"unix:{tree_socket}", volume=LOCAL_VOLUME)
    return description
