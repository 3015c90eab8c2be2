"""``cloudfs gateway s3``: serve volumes of the tree service as S3 buckets.

    cloudfs gateway s3 --listen 0.0.0.0:9000 --meta 10.0.0.2:7070 --volume imagenet

Bucket = volume (path-style URLs, http://HOST:PORT/VOLUME/KEY). Requests must
be signed (SigV4) with a key of --keys-file ("ACCESS SECRET" lines) or of
$CLOUDFS_GATEWAY_ACCESS_KEY/$CLOUDFS_GATEWAY_SECRET_KEY. Reads go through
this process's block cache (keyed as a mount's), writes are committed into
the tree and the UFS as a mount's write-through commits them. Stays in the
foreground; SIGTERM or SIGINT stops accepting and lets requests under way
finish. Beyond loopback it serves HTTPS (``--tls-cert``/``--tls-key``, with
``--tls-client-ca`` for mTLS) unless ``--insecure``; its calls to the tree
service use TLS with ``--meta-tls-ca`` (``--meta-tls-cert``/``--meta-tls-key``
for mTLS). See docs/gateway.md and docs/security.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from typing import Any

from cloudfs.cli import server_logs, tls_flags
from cloudfs.cli.meta_serve import read_token
from cloudfs.cli.tree_flags import add_tree_flags, tree_address
from cloudfs.errors import FsError, StartupError, UsageError
from cloudfs.gateway.errors import S3Error
from cloudfs.lib.endpoints import check_can_listen, parse_host_port, serve_metrics
from cloudfs.lib.serve import serve_until_signal

log = logging.getLogger(__name__)


def add_parser(commands: Any) -> None:
    gateway = commands.add_parser("gateway", help="serve volumes over other protocols")
    sub = gateway.add_subparsers(dest="gateway_command", required=True, metavar="PROTOCOL")
    p: argparse.ArgumentParser = sub.add_parser(
        "s3",
        help="serve volumes as S3 buckets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--listen", default="127.0.0.1:9000", help="HOST:PORT (127.0.0.1:9000)")
    p.add_argument(
        "--volume",
        action="append",
        default=[],
        metavar="NAME",
        help="serve this volume (repeatable; default: every volume of the tree service)",
    )
    add_tree_flags(p)
    p.add_argument("--keys-file", help='"ACCESS SECRET" lines (default: the environment keys)')
    p.add_argument("--region", default="us-east-1", help="the region buckets are in (us-east-1)")
    p.add_argument("--block-size", default="4M", help="cache block size: the mounts' (4M)")
    p.add_argument("--memory-cache-size", default="1G", help="in-memory block cache (1G)")
    p.add_argument(
        "--meta-ttl", default="1", help="seconds a directory is trusted without asking (1)"
    )
    p.add_argument("--staging-dir", help="staged uploads and multipart parts (a temp dir)")
    p.add_argument("--s3-endpoint", help="S3 endpoint URL of the volumes' buckets")
    p.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics here")
    p.add_argument("--threads", default="32", help="requests served at once (32)")
    tls_flags.add_server_flags(p)
    p.add_argument("--debug", action="store_true", help="verbose logging")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cloudfs.client.options import client_options
    from cloudfs.gateway import sigv4
    from cloudfs.gateway.context import Gateway
    from cloudfs.gateway.server import GatewayServer
    from cloudfs.gateway.volumes import Buckets
    from cloudfs.metrics import GatewayMetrics, Metrics

    server_logs.configure(args.debug)
    host, port = parse_host_port(args.listen, "--listen")
    if not args.threads.isdigit() or int(args.threads) < 1:
        raise UsageError(f"--threads wants a positive number, not {args.threads!r}")
    keys = sigv4.load_keys(args.keys_file)
    tls = tls_flags.server_tls(args, log)
    options = client_options(
        meta_server=tree_address(args),
        token=read_token(args.meta_token_file),
        block_size=args.block_size,
        memory_cache_size=args.memory_cache_size,
        s3_endpoint=args.s3_endpoint,
        meta_ttl=args.meta_ttl,
        tls_ca=args.meta_tls_ca,
        tls_cert=args.meta_tls_cert,
        tls_key=args.meta_tls_key,
    )
    check_can_listen(host, port)
    staging = args.staging_dir or tempfile.mkdtemp(prefix="cloudfs-gateway-")
    try:
        os.makedirs(os.path.join(staging, "uploads"), exist_ok=True)
    except OSError as e:
        raise StartupError(f"cannot use staging directory {staging}: {e.strerror or e}") from None
    metrics = Metrics()
    buckets = Buckets(options, metrics, tuple(dict.fromkeys(args.volume)))
    for name in args.volume:  # a typo is said now, not as NoSuchBucket to every client
        try:
            buckets.handle(name)
        except S3Error:
            raise UsageError(f"no volume {name!r} on {options.meta_server}") from None
        except FsError as e:
            raise StartupError(f"cannot open volume {name!r}: {e}") from None
    gateway = Gateway(
        buckets, staging, options.block_size, region=args.region, metrics=GatewayMetrics(metrics)
    )
    try:
        server = GatewayServer(gateway, args.listen, keys, threads=int(args.threads), tls=tls)
    except OSError as e:
        raise StartupError(f"cannot listen on {args.listen}: {e.strerror or e}") from None
    if args.metrics:
        serve_metrics(args.metrics, metrics)

    def ready() -> None:
        log.info(
            "S3 gateway on port %d%s, staging in %s",
            server.port,
            " over TLS" if tls else "",
            staging,
        )
        print(f"listening on {host}:{server.port}", flush=True)

    try:
        serve_until_signal(server, ready=ready)
    finally:
        buckets.close()
    return 0
