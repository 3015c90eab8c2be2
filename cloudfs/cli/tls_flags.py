"""The TLS flags of the servers and clients (``cloudfs/tls.py`` does the work).

Servers: ``--tls-cert FILE --tls-key FILE`` serve TLS, ``--tls-client-ca FILE``
requires client certificates it signed, ``--insecure`` allows a plaintext
listener beyond loopback. Clients: ``--tls-ca FILE`` turns TLS on to the tree
service and cache workers, ``--tls-cert``/``--tls-key`` present a client
certificate; each falls back to ``$CLOUDFS_TLS_CA``, ``$CLOUDFS_TLS_CERT``,
``$CLOUDFS_TLS_KEY``. A server that is also a client of the tree service
(``cache serve --group``, ``gateway s3``) spells its outgoing side
``--meta-tls-ca``, ``--meta-tls-cert``, ``--meta-tls-key``, as its token is
``--meta-token-file``.
"""

from __future__ import annotations

import argparse
import logging

from cloudfs.tls import (
    TLS_CA_ENV,
    TLS_CERT_ENV,
    TLS_KEY_ENV,
    ServerTLS,
    check_listener,
    client_tls,
    load_server_tls,
)

__all__ = ["add_client_flags", "add_server_flags", "client_tls", "server_tls"]


def add_server_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls-cert", metavar="FILE", help="serve TLS with this certificate (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    p.add_argument(
        "--tls-client-ca",
        metavar="FILE",
        help="require client certificates signed by this CA (mTLS)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow listening beyond loopback without TLS (a trusted network only)",
    )


def server_tls(args: argparse.Namespace, log: logging.Logger) -> ServerTLS | None:
    """The server's TLS from its flags, and the plaintext rule for ``--listen``."""
    tls = load_server_tls(args.tls_cert, args.tls_key, args.tls_client_ca)
    check_listener(args.listen, tls, insecure=args.insecure, log=log)
    return tls


def add_client_flags(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--{prefix}tls-ca``, ``--{prefix}tls-cert``, ``--{prefix}tls-key``."""
    to = "the tree service" if prefix else "the tree service and cache workers"
    p.add_argument(
        f"--{prefix}tls-ca", metavar="FILE", help=f"TLS to {to}: their CA (${TLS_CA_ENV})"
    )
    p.add_argument(
        f"--{prefix}tls-cert",
        metavar="FILE",
        help=f"client certificate for {to} (mTLS, ${TLS_CERT_ENV})",
    )
    p.add_argument(f"--{prefix}tls-key", metavar="FILE", help=f"its private key (${TLS_KEY_ENV})")
