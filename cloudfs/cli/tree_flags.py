"""``--tree``, ``--token-file`` and the client TLS flags of the commands that ask the
tree service from Kubernetes (``scheduler extender``, ``scheduler admission-check``)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from cloudfs.cli.meta_serve import read_token
from cloudfs.cli.tls_flags import add_client_flags, client_tls
from cloudfs.errors import StartupError
from cloudfs.meta.client.tree_uri import parse_tree_address
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token


@dataclass(frozen=True)
class TreeTarget:
    address: str  # HOST:PORT
    token: Token | None
    tls: ClientTLS | None


def add_tree_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tree",
        default=os.environ.get("CLOUDFS_META_SERVER"),
        metavar="grpc://HOST:PORT",
        help="the tree service the mounts report to ($CLOUDFS_META_SERVER)",
    )
    p.add_argument("--token-file", help="the tree service's token ($CLOUDFS_META_TOKEN)")
    add_client_flags(p)


def tree_target(args: argparse.Namespace) -> TreeTarget:
    """The tree service the flags name; StartupError if none is given."""
    if not args.tree:
        raise StartupError("--tree grpc://HOST:PORT (or $CLOUDFS_META_SERVER) is required")
    address = parse_tree_address(args.tree, "--tree") if "://" in args.tree else args.tree
    token = read_token(args.token_file) or os.environ.get("CLOUDFS_META_TOKEN") or None
    return TreeTarget(address, token, client_tls(args.tls_ca, args.tls_cert, args.tls_key))
