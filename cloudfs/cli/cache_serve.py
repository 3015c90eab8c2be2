"""``cloudfs cache serve``: run a cache worker, serving blocks to a cache group (HTTP).

    cloudfs cache serve --listen 10.0.0.7:7080 --cache-dir /var/cache/cloudfs-worker \\
        --cache-size 500G --token-file /etc/cloudfs/cache-token

With ``--group NAME --meta-server grpc://HOST:PORT`` the worker joins the cache group
NAME kept by that tree service, as ``--advertise`` (default: ``--listen``, which
must then name an address other nodes can reach), renewing every few seconds
(``--heartbeat``) and leaving on SIGTERM; a worker killed outright is no longer
listed about three heartbeats later. If the tree service is away the worker
keeps serving and keeps trying.

Mounts started with ``--cache-group NAME`` or ``--cache-peers`` ask each block
they miss of its owner in the group; the worker answers from its memory and
disk tiers or fetches the block from the object store once, for every caller.
It serves any store it is asked for, opened with its own endpoint and
credentials (the environment, as for ``cloudfs mount``; ``--s3-endpoint``
overrides): anyone with the token can
read what those credentials can. ``file://`` stores only with
``--allow-file-stores``. Stays in the foreground; SIGTERM or SIGINT stops it
after the calls in flight. Only a worker listening on loopback may run
without a token (``--no-token``) or without TLS (``--tls-cert``/``--tls-key``;
``--insecure`` allows plaintext beyond loopback). The token file is re-read
when it changes. Its calls to the tree service (``--group``) use TLS with
``--meta-tls-ca`` (and ``--meta-tls-cert``/``--meta-tls-key`` for mTLS). See
docs/security.md.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass
from typing import Any

from cloudfs.cache.admission import POLICIES, make_admission
from cloudfs.cache.disk import DiskBlockCache
from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.cli import server_logs, tls_flags
from cloudfs.cli.meta_serve import is_loopback, read_token
from cloudfs.cli.tree_flags import add_tree_flags, tree_address, tree_tls, tree_token
from cloudfs.config import MiB, S3Config
from cloudfs.errors import FsError, StartupError, UsageError
from cloudfs.lib.endpoints import check_can_listen, parse_host_port, serve_metrics
from cloudfs.lib.serve import serve_until_signal
from cloudfs.meta.client.groups import GroupClient
from cloudfs.meta.wire.groups import validate_group_name, validate_member_address
from cloudfs.metrics import Metrics
from cloudfs.mount import checks
from cloudfs.peers.membership import HEARTBEAT_SECONDS, TTL_HEARTBEATS, GroupHeartbeat
from cloudfs.peers.stores import StoreCache
from cloudfs.peers.worker import BlockWorker
from cloudfs.sizes import parse_seconds, parse_size
from cloudfs.tls import ClientTLS
from cloudfs.tokens import Token

log = logging.getLogger(__name__)

# The disk tier's admission sketch is sized in blocks; callers choose the block size.
TYPICAL_BLOCK = 4 * MiB


def add_parser(commands: Any) -> None:
    cache = commands.add_parser("cache", help="cache workers of a cache group")
    sub = cache.add_subparsers(dest="cache_command", required=True, metavar="COMMAND")
    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="serve blocks to a cache group over HTTP", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    p.add_argument("--listen", default="127.0.0.1:7080", help="HOST:PORT (127.0.0.1:7080)")
    p.add_argument("--cache-dir", required=True, help="where the disk tier keeps its blocks")
    p.add_argument("--cache-size", default="10G", help="disk tier limit (10G)")
    p.add_argument("--memory-cache-size", default="256M", help="memory tier limit (256M)")
    p.add_argument(
        "--cache-policy", default="tinylfu", help="disk admission: tinylfu or lru (tinylfu)"
    )
    p.add_argument("--token-file", help="callers must send the token in this file")
    p.add_argument(
        "--no-token", action="store_true", help="no token (only when listening on loopback)"
    )
    p.add_argument("--threads", default="64", help="calls served at once (64)")
    p.add_argument("--s3-endpoint", help="S3 endpoint URL (default: AWS config/environment)")
    p.add_argument("--s3-region", help="S3 region (default: AWS config/environment)")
    p.add_argument(
        "--allow-file-stores",
        action="store_true",
        help="also serve file:// stores (directories of this host, e.g. a shared NAS mount)",
    )
    p.add_argument(
        "--group", metavar="NAME", help="join this cache group (kept by --meta-server)"
    )
    add_tree_flags(p)
    p.add_argument(
        "--advertise",
        metavar="HOST:PORT",
        help="the address mounts dial, as listed in the group (default: --listen)",
    )
    p.add_argument(
        "--heartbeat",
        default=str(HEARTBEAT_SECONDS),
        help=f"seconds between renewals; listed for {TTL_HEARTBEATS} of them "
        f"({HEARTBEAT_SECONDS:g})",
    )
    p.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics here")
    tls_flags.add_server_flags(p)
    p.add_argument("--debug", action="store_true", help="verbose logging")
    p.add_argument(
        "--max-connections-per-client",
        default="256",
        help="connections open at once per client host; 0: no limit (256)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cloudfs.peers.server import CacheServer  # after the flags are checked

    server_logs.configure(args.debug)
    host, port = parse_host_port(args.listen, "--listen")
    token = read_token(args.token_file)
    if token is None and not (args.no_token and is_loopback(args.listen)):
        raise UsageError(
            "--token-file is required (--no-token only when listening on 127.0.0.1 or [::1])"
        )
    disk_bytes = parse_size(args.cache_size)
    memory_bytes = parse_size(args.memory_cache_size)
    if args.cache_policy not in POLICIES:
        raise UsageError(f"--cache-policy must be one of {', '.join(POLICIES)}")
    if not args.threads.isascii() or not args.threads.isdigit() or int(args.threads) < 1:
        raise UsageError(f"--threads wants a positive number, not {args.threads!r}")
    per_client = args.max_connections_per_client
    if not per_client.isascii() or not per_client.isdigit():
        raise UsageError(f"--max-connections-per-client wants a number, not {per_client!r}")
    joining = _joining(args)
    tls = tls_flags.server_tls(args, log)
    check_can_listen(host, port)
    cache_dir = os.path.abspath(args.cache_dir)
    lock = checks.lock_cache_dir(cache_dir)  # two workers must not share one index
    metrics = Metrics()
    try:
        disk = DiskBlockCache(
            [os.path.join(cache_dir, "blocks")],
            disk_bytes,
            metrics,
            admission=make_admission(args.cache_policy, max(1, disk_bytes // TYPICAL_BLOCK)),
            min_free_ratio=0.1,
        )
    except OSError as e:
        raise StartupError(f"cannot use cache directory {cache_dir}: {e.strerror or e}") from None
    stores = StoreCache(
        S3Config(endpoint_url=args.s3_endpoint, region=args.s3_region),
        metrics,
        allow_file=args.allow_file_stores,
    )
    worker = BlockWorker(stores, MemoryBlockCache(memory_bytes, metrics), disk, metrics)
    try:
        server = CacheServer(
            worker, args.listen, metrics, token=token, threads=int(args.threads), tls=tls,
            max_connections_per_client=int(per_client),
        )  # fmt: skip
    except (OSError, RuntimeError, ValueError) as e:
        raise StartupError(f"cannot listen on {args.listen}: {e}") from None
    if args.metrics:
        serve_metrics(args.metrics, metrics)
    heartbeats = (
        [_heartbeat(joining, joining.advertise or f"{host}:{server.port}")] if joining else []
    )

    def ready() -> None:
        log.info(
            "cache worker on port %d, blocks in %s%s%s",
            server.port,
            cache_dir,
            " over TLS" if tls else "",
            " (token required)" if token else "",
        )
        print(f"listening on {host}:{server.port}", flush=True)

    try:
        # The heartbeat starts after the server and stops first: mounts stop asking
        # before the worker stops answering.
        serve_until_signal(server, *heartbeats, ready=ready)
    finally:
        lock.close()
    return 0


@dataclass(frozen=True, slots=True)
class Joining:
    """``--group``: which group, through which tree service, as which address."""

    group: str
    meta: str  # HOST:PORT of the tree service
    token: Token | None
    tls: ClientTLS | None
    advertise: str | None  # None: --listen, with the port actually bound
    interval: float


def _joining(args: argparse.Namespace) -> Joining | None:
    """``--group`` and its companions, checked (``UsageError``); None without ``--group``."""
    if args.group is None:
        if args.meta_server or args.advertise:
            raise UsageError("--meta-server and --advertise go with --group")
        return None
    target = tree_address(args)
    if target is None:
        raise UsageError("--group needs --meta-server grpc://HOST:PORT (the tree service)")
    try:
        validate_group_name(args.group)
        advertise = args.advertise or args.listen
        host, port = parse_host_port(advertise, "--advertise")
        if args.advertise:
            validate_member_address(f"{host}:{port}")
        else:
            validate_member_address(f"{host}:{port or 1}")  # :0 becomes the bound port
    except FsError as e:
        raise UsageError(
            f"{e}; give --advertise HOST:PORT when --listen names every interface"
            if not args.advertise
            else str(e)
        ) from None
    interval = parse_seconds(str(args.heartbeat))
    if not 0.5 <= interval <= 100:  # the TTL, 3 of them, must be 1.5 s..300 s
        raise UsageError("--heartbeat wants 0.5 to 100 seconds")
    return Joining(
        group=args.group,
        meta=target,
        token=tree_token(args),
        tls=tree_tls(args),
        advertise=f"{host}:{port}" if args.advertise else None,
        interval=interval,
    )


def _heartbeat(joining: Joining, address: str) -> GroupHeartbeat:
    """The worker's heartbeat in ``joining``'s group as ``address``, not started yet."""
    log.info("joining cache group %s at %s as %s", joining.group, joining.meta, address)
    return GroupHeartbeat(
        GroupClient(joining.meta, token=joining.token, tls=joining.tls),
        joining.group,
        address,
        interval=joining.interval,
    )
