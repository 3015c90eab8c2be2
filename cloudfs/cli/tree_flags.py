"""How every command names the tree service as a client of it: one spelling, one reading.

    --meta-server [grpc://]HOST:PORT   ($CLOUDFS_META_SERVER)
    --meta-token-file FILE             ($CLOUDFS_META_TOKEN holds the token itself)
    --meta-tls-ca FILE                 ($CLOUDFS_TLS_CA: TLS on, trusting this CA)
    --meta-tls-cert FILE, --meta-tls-key FILE  ($CLOUDFS_TLS_CERT, $CLOUDFS_TLS_KEY: mTLS)

``volume *``, ``cache serve``, ``gateway s3``, ``scheduler extender`` and
``scheduler admission-check`` take these. The ``meta-`` prefix keeps them
apart from a server's own ``--tls-cert/--tls-key`` and ``--token-file``
(``cache serve`` and ``gateway s3`` are servers too). The spellings each
command had before stay as hidden aliases: ``--server``, ``--meta``,
``--tree``; and, where they never meant anything else (commands that serve
nothing of their own), ``--token-file`` and ``--tls-ca/--tls-cert/--tls-key``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from cloudfs.cli.meta_serve import read_token
from cloudfs.errors import UsageError
from cloudfs.meta.client.tree_uri import parse_tree_address
from cloudfs.tls import TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV, ClientTLS, client_tls
from cloudfs.tokens import Token

SERVER_ENV = "CLOUDFS_META_SERVER"
TOKEN_ENV = "CLOUDFS_META_TOKEN"


@dataclass(frozen=True)
class TreeTarget:
    address: str  # HOST:PORT
    token: Token | None
    tls: ClientTLS | None


def add_tree_flags(p: argparse.ArgumentParser, *, client_only: bool = False) -> None:
    """The tree-service client flags; ``client_only``: the command serves nothing of its
    own, so the bare ``--token-file`` and ``--tls-*`` spellings are free to alias them."""
    p.add_argument(
        "--meta-server",
        metavar="[grpc://]HOST:PORT",
        help=f"the tree service (${SERVER_ENV})",
    )
    for old in ("--server", "--meta", "--tree"):
        p.add_argument(old, dest="meta_server", help=argparse.SUPPRESS)
    p.add_argument(
        "--meta-token-file", metavar="FILE", help=f"the tree service's token (${TOKEN_ENV})"
    )
    p.add_argument(
        "--meta-tls-ca", metavar="FILE", help=f"TLS to the tree service: its CA (${TLS_CA_ENV})"
    )
    p.add_argument(
        "--meta-tls-cert",
        metavar="FILE",
        help=f"client certificate for the tree service (mTLS, ${TLS_CERT_ENV})",
    )
    p.add_argument("--meta-tls-key", metavar="FILE", help=f"its private key (${TLS_KEY_ENV})")
    if client_only:
        p.add_argument("--token-file", dest="meta_token_file", help=argparse.SUPPRESS)
        for part in ("ca", "cert", "key"):
            p.add_argument(f"--tls-{part}", dest=f"meta_tls_{part}", help=argparse.SUPPRESS)


def tree_address(args: argparse.Namespace) -> str | None:
    """``HOST:PORT`` of the tree service the flags (or ``$CLOUDFS_META_SERVER``) name."""
    given = args.meta_server or os.environ.get(SERVER_ENV) or None
    if given is None:
        return None
    if "://" in given:
        return parse_tree_address(given, "--meta-server")
    host, sep, port = given.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()):
        raise UsageError(f"--meta-server wants [grpc://]HOST:PORT, not {given!r}")
    return given


def tree_target(args: argparse.Namespace) -> TreeTarget:
    """The tree service the flags name, its token and TLS; UsageError if none is named."""
    address = tree_address(args)
    if address is None:
        raise UsageError(f"--meta-server [grpc://]HOST:PORT (or ${SERVER_ENV}) is required")
    return TreeTarget(address, tree_token(args), tree_tls(args))


def tree_token(args: argparse.Namespace) -> Token | None:
    return read_token(args.meta_token_file) or os.environ.get(TOKEN_ENV) or None


def tree_tls(args: argparse.Namespace) -> ClientTLS | None:
    return client_tls(args.meta_tls_ca, args.meta_tls_cert, args.meta_tls_key)
