"""``cloudfs scheduler admission-check``: Kueue's data-readiness admission check.

    cloudfs scheduler admission-check --tree grpc://cloudfs-meta:7070 \\
        --warmup-image ghcr.io/cloudfs/cloudfs-csi:0.1.0

Marks the AdmissionChecks whose ``controllerName`` is ``cloudfs.io/data-readiness``
Active; for each Workload with quota reserved and such a check Pending, warms
its CloudFS volumes on the chosen nodes (a Job per node running ``cloudfs
warmup``) and sets the check Ready once each node caches ``--ready-fraction``
of every volume, as the mounts report it to the tree service. Sizes come from
the Workload annotation ``cloudfs.io/dataset-bytes`` or ``--dataset-bytes``.
See docs/kubernetes-scheduling.md.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from cloudfs.cli import server_logs
from cloudfs.cli.tree_flags import add_tree_flags, tree_target
from cloudfs.errors import StartupError

log = logging.getLogger("cloudfs.k8s")

TREE_TIMEOUT = 5.0  # seconds per tree-service call


def add_admission_parser(subparsers: Any) -> None:
    """Add ``admission-check`` to the subcommands of ``cloudfs scheduler``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "admission-check",
        help="run Kueue's data-readiness admission check controller",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_tree_flags(p, client_only=True)
    p.add_argument("--warmup-image", required=True, help="image of the warm-up Jobs")
    p.add_argument("--controller-name", default="cloudfs.io/data-readiness")
    p.add_argument("--ready-fraction", type=float, default=0.8, help="default threshold")
    p.add_argument("--dataset-bytes", default="", metavar="VOL=SIZE,...", help="known sizes")
    p.add_argument("--interval", type=float, default=10.0, help="seconds between passes")
    p.add_argument("--driver-name", default="csi.cloudfs.io", help="the CloudFS CSI driver")
    p.add_argument("--kube-api", metavar="URL", help="API server URL (default: in-cluster)")
    p.add_argument("--once", action="store_true", help="one pass, then exit (for tests)")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cloudfs.k8s.admission_controller import AdmissionController
    from cloudfs.k8s.dataset_sizes import parse_sizes
    from cloudfs.k8s.kube_api import ApiClaimResolver, KubeApi
    from cloudfs.k8s.tree_view import TreeServiceView
    from cloudfs.meta.client.cache_reports import CacheReportClient
    from cloudfs.meta.client.volumes import VolumeClient

    server_logs.configure(args.debug)
    target = tree_target(args)
    if not 0.0 < args.ready_fraction <= 1.0:
        raise StartupError("--ready-fraction must be in (0, 1]")
    api = KubeApi(args.kube_api) if args.kube_api else KubeApi.in_cluster()
    if api is None:
        raise StartupError("not in a cluster: give --kube-api URL")
    address, token, tls = target.address, target.token, target.tls
    tree = TreeServiceView(
        CacheReportClient(address, token=token, timeout=TREE_TIMEOUT, tls=tls),
        VolumeClient(address, token=token, timeout=TREE_TIMEOUT, tls=tls),
    )
    controller = AdmissionController(
        api,
        tree,
        image=args.warmup_image,
        resolver=ApiClaimResolver(api, args.driver_name),
        controller_name=args.controller_name,
        default_sizes=parse_sizes(args.dataset_bytes),
        default_fraction=args.ready_fraction,
        driver=args.driver_name,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log.info(
        "data-readiness admission check %s (tree service %s)", args.controller_name, target.address
    )
    try:
        if args.once:
            controller.reconcile_once()
        else:
            controller.run(stop, args.interval)
    except KeyboardInterrupt:
        pass
    finally:
        tree.close()
    return 0
