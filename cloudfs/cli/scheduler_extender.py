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
from typing import Any

from cloudfs.cli import server_logs
from cloudfs.cli.tree_flags import add_tree_flags, tree_target
from cloudfs.errors import StartupError
from cloudfs.lib.endpoints import parse_host_port

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
    add_tree_flags(p, client_only=True)
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
    from cloudfs.meta.client.cache_reports import CacheReportClient

    server_logs.configure(args.debug)
    host, port = parse_host_port(args.listen, "--listen")
    target = tree_target(args)
    cache = CacheReportClient(target.address, token=target.token, tls=target.tls)
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
    log.info(
        "scheduler extender on %s%s (tree service %s)", args.listen, server.prefix, target.address
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        cache.close()
    return 0
