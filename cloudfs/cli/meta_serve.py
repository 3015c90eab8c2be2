"""``cloudfs meta serve``: run the directory-tree service (gRPC) over an engine.

    cloudfs meta serve --engine lmdb:///var/lib/cloudfs/tree --listen 127.0.0.1:7070

Stays in the foreground (a service manager or Kubernetes runs it); SIGTERM or
SIGINT stops it after the calls in flight. Every client must present the
token in ``--token-file`` (re-read when the file changes: a rotated token
works without a restart); only a server listening on loopback may run
without one (``--no-token``, for trying it out). Beyond loopback it serves
TLS (``--tls-cert``/``--tls-key``, and ``--tls-client-ca`` for mTLS) unless
``--insecure`` is given; see docs/security.md. UFS credentials for the
volumes' listings come from the environment, as for ``cloudfs mount``.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from cloudfs.cli import server_logs, tls_flags
from cloudfs.config import S3Config
from cloudfs.errors import StartupError, UsageError
from cloudfs.lib.serve import serve_until_signal
from cloudfs.meta.engine.kv import KVEngine
from cloudfs.meta.engine.kv_lmdb import LmdbKV
from cloudfs.tls import is_loopback
from cloudfs.tokens import TokenFile
from cloudfs.ufs.factory import open_store

__all__ = ["add_parser", "is_loopback", "read_token", "run"]


def add_parser(commands: Any) -> None:
    meta = commands.add_parser("meta", help="the directory-tree service")
    sub = meta.add_subparsers(dest="meta_command", required=True, metavar="COMMAND")
    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="serve volumes' trees over gRPC", description=__doc__
    )
    p.add_argument(
        "--engine",
        required=True,
        help="lmdb:///dir (one server) or etcd://h1:2379,h2:2379[/prefix]"
        "[?cacert=FILE&cert=FILE&key=FILE] (TLS to etcd: docs/security.md)",
    )
    p.add_argument("--listen", default="127.0.0.1:7070", help="HOST:PORT (127.0.0.1:7070)")
    p.add_argument("--token-file", help="clients must send the token in this file")
    p.add_argument(
        "--no-token", action="store_true", help="no token (only when listening on loopback)"
    )
    p.add_argument(
        "--threads", default="256", help="concurrent calls, one Watch per mount included (256)"
    )
    p.add_argument("--s3-endpoint", help="S3 endpoint URL of the volumes' buckets")
    tls_flags.add_server_flags(p)
    p.add_argument("--debug", action="store_true", help="verbose logging")
    p.add_argument(
        "--max-calls-per-client",
        default="128",
        help="calls in flight per client host, Watch streams apart; 0: no limit (128)",
    )
    p.set_defaults(run=run)


def read_token(path: str | None) -> TokenFile | None:
    """The token of ``--token-file`` (``UsageError`` if unreadable or empty), re-read
    whenever the file changes."""
    return TokenFile(path) if path is not None else None


def open_engine(uri: str) -> KVEngine:
    if uri.startswith("lmdb://"):
        path = uri[len("lmdb://") :]
        if not path.startswith("/"):
            raise UsageError(f"expected lmdb:///absolute/dir, got '{uri}'")
        try:
            return LmdbKV(path)
        except Exception as e:
            raise StartupError(f"cannot open {uri}: {e}") from None
    if uri.startswith("etcd://"):
        from cloudfs.meta.engine import kv_etcd

        return kv_etcd.open_engine(uri)
    raise UsageError(f"unknown engine '{uri}' (expected lmdb:///dir or etcd://host:port,...)")


def run(args: argparse.Namespace) -> int:
    from cloudfs.meta.service.limits import ServerLimits
    from cloudfs.meta.service.server import TreeServer
    from cloudfs.meta.service.volumes import Volumes

    server_logs.configure(args.debug)
    token = read_token(args.token_file)
    if token is None and not (args.no_token and is_loopback(args.listen)):
        raise UsageError(
            "--token-file is required (--no-token only when listening on 127.0.0.1 or [::1])"
        )
    tls = tls_flags.server_tls(args, logging.getLogger(__name__))
    per_client = count_flag("--max-calls-per-client", args.max_calls_per_client)
    threads = count_flag("--threads", args.threads) or 1
    engine = open_engine(args.engine)
    s3 = S3Config(endpoint_url=args.s3_endpoint)
    volumes = Volumes(engine, lambda uri: open_store(uri, s3))
    try:
        server = TreeServer(
            volumes, args.listen, token=token, threads=threads, tls=tls,
            limits=ServerLimits(max_calls_per_client=per_client),
        )  # fmt: skip
    except (OSError, RuntimeError, ValueError) as e:
        raise StartupError(f"cannot listen on {args.listen}: {e}") from None

    def ready() -> None:
        logging.getLogger(__name__).info(
            "serving %s on port %d%s%s",
            args.engine,
            server.port,
            " over TLS" if tls else "",
            " (token required)" if token else "",
        )
        print(f"listening on {args.listen.rsplit(':', 1)[0]}:{server.port}", flush=True)

    try:
        serve_until_signal(server, ready=ready)
    finally:
        volumes.close()
        engine.close()
    return 0


def count_flag(flag: str, value: str) -> int:
    """A flag's whole number, 0 or more; ``UsageError`` otherwise."""
    if not value.strip().isascii() or not value.strip().isdigit():
        raise UsageError(f"{flag} must be a whole number (0 or more), not {value!r}")
    return int(value)
