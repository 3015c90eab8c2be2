"""``cloudfs scheduler extender``: a kube-scheduler extender that scores nodes by cached data.

    cloudfs scheduler extender --listen 0.0.0.0:8888 --tree grpc://cloudfs-tree:7070

kube-scheduler POSTs ``<urlPrefix>/filter`` and ``<urlPrefix>/prioritize``
(``--prefix`` is the path part of its urlPrefix). Nodes score 0-10 by the
bytes of the pod's CloudFS volumes their mounts reported to the tree service
(``--tree``; token from ``--token-file`` or ``$CLOUDFS_META_TOKEN``). In a
cluster the pod's PVCs are resolved through the Kubernetes API with the
pod's service account; ``--kube-api URL`` names another API server
(plain, no token: for tests), ``--no-kube-api`` reads annotations only.
See docs/kubernetes-scheduling.md.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from cloudfs.cli import server_logs
from cloudfs.cli.endpoints import parse_host_port
from cloudfs.cli.meta_serve import read_token
from cloudfs.cli.tls_flags import add_client_flags, client_tls
from cloudfs.errors import StartupError
from cloudfs.meta.remote import parse_tree_address

log = logging.getLogger("cloudfs.k8s")


def add_extender_parser(subparsers: Any) -> None:
    """Add ``extender`` to the subcommands of ``cloudfs scheduler``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "extender",
        help="serve a kube-scheduler extender that prefers nodes caching a pod's data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--listen", required=True, metavar="HOST:PORT", help="where to serve HTTP")
    p.add_argument(
        "--tree",
        default=os.environ.get("CLOUDFS_META_SERVER"),
        metavar="grpc://HOST:PORT",
        help="the tree service the mounts report to ($CLOUDFS_META_SERVER)",
    )
    p.add_argument("--token-file", help="the tree service's token ($CLOUDFS_META_TOKEN)")
    add_client_flags(p)
    p.add_argument("--prefix", default="", help="path before the verbs (urlPrefix's path)")
    p.add_argument("--driver-name", default="csi.cloudfs.io", help="the CloudFS CSI driver")
    p.add_argument(
        "--node-label",
        metavar="KEY[=VALUE]",
        help="filter out nodes without this label (only when sent whole Node objects)",
    )
    api = p.add_mutually_exclusive_group()
    api.add_argument("--kube-api", metavar="URL", help="API server URL (default: in-cluster)")
    api.add_argument("--no-kube-api", action="store_true", help="annotations and inline only")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cloudfs.k8s.extender import Extender
    from cloudfs.k8s.kube_api import ApiClaimResolver, KubeApi
    from cloudfs.k8s.server import ExtenderServer
    from cloudfs.meta.cache_report import CacheReportClient

    server_logs.configure(args.debug)
    host, port = parse_host_port(args.listen, "--listen")
    if not args.tree:
        raise StartupError("--tree grpc://HOST:PORT (or $CLOUDFS_META_SERVER) is required")
    address = parse_tree_address(args.tree, "--tree") if "://" in args.tree else args.tree
    token = read_token(args.token_file) or os.environ.get("CLOUDFS_META_TOKEN") or None
    cache = CacheReportClient(
        address, token=token, tls=client_tls(args.tls_ca, args.tls_cert, args.tls_key)
    )
    api: KubeApi | None = None
    if args.kube_api:
        api = KubeApi(args.kube_api)
    elif not args.no_kube_api:
        api = KubeApi.in_cluster()
        if api is None:
            log.info("not in a cluster: pods' PVCs are not resolved (annotations only)")
    resolver = ApiClaimResolver(api, args.driver_name) if api is not None else None
    extender = Extender(cache, resolver, driver=args.driver_name, node_label=args.node_label)
    try:
        server = ExtenderServer((host, port), extender, args.prefix)
    except OSError as e:
        cache.close()
        raise StartupError(f"--listen {args.listen}: {e}") from None
    log.info("scheduler extender on %s%s (tree service %s)", args.listen, server.prefix, address)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        cache.close()
    return 0
