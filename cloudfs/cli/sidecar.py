"""``cloudfs sidecar``: sidecar mode on Kubernetes (docs/csi.md, "Node mode or sidecar mode").

    cloudfs sidecar webhook --listen 0.0.0.0:8443 --tls-cert tls.crt --tls-key tls.key \\
        --image ghcr.io/cloudfs/cloudfs-csi:0.1.0
    cloudfs sidecar probe /cloudfs/mnt/data

``webhook`` serves the mutating admission webhook (``POST /mutate``,
``GET /healthz``, HTTPS only) that gives pods labelled ``cloudfs.io/inject:
"true"`` one native sidecar per CloudFS volume; it reads PVCs, PVs,
StorageClasses and Secrets with the pod's service account (``--kube-api URL``:
another API server, plain, no token: for tests). ``probe`` is the sidecars'
startup probe: exit 0 once every PATH is a CloudFS mount that answers.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from cloudfs.cli import server_logs
from cloudfs.errors import StartupError, UsageError
from cloudfs.sizes import parse_quantity, parse_seconds

log = logging.getLogger("cloudfs.sidecar")


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "sidecar",
        help="sidecar mode on Kubernetes: the injecting webhook and the sidecar's probe",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    w = verbs.add_parser("webhook", help="serve the mutating admission webhook (HTTPS)")
    w.add_argument("--listen", required=True, metavar="HOST:PORT", help="where to serve HTTPS")
    w.add_argument("--tls-cert", required=True, metavar="FILE", help="its certificate (PEM)")
    w.add_argument("--tls-key", required=True, metavar="FILE", help="the certificate's key (PEM)")
    w.add_argument("--image", required=True, help="the sidecars' image (the cloudfs client)")
    w.add_argument("--driver-name", default="csi.cloudfs.io", help="the CloudFS CSI driver name")
    w.add_argument(
        "--native-sidecars",
        choices=("auto", "yes", "no"),
        default="auto",
        help="whether the cluster has native sidecars (auto: Kubernetes 1.29 or later)",
    )
    w.add_argument(
        "--on-error",
        choices=("refuse", "admit"),
        default="refuse",
        help="a pod that asks but cannot be given its sidecars: refused (default), or "
        "admitted unchanged with a Warning event",
    )
    w.add_argument(
        "--cache-host-paths",
        default="",
        metavar="DIR[,DIR]",
        help="node directories under which a pod may put its cache (cloudfs.io/cache-host-path)",
    )
    w.add_argument("--cache-size", default="10G", help="default disk cache per volume (10G)")
    w.add_argument(
        "--drain-timeout",
        default="600",
        help="default seconds a write-back sidecar waits for uploads at the pod's end (600)",
    )
    w.add_argument("--kube-api", metavar="URL", help="API server URL (default: in-cluster)")
    w.add_argument("--debug", action="store_true")
    w.set_defaults(run=run_webhook)
    probe = verbs.add_parser("probe", help="exit 0 once every PATH is a CloudFS mount that answers")
    probe.add_argument("paths", nargs="+", metavar="PATH")
    probe.add_argument("--timeout", default="4", help="seconds each mount has to answer (4)")
    probe.set_defaults(run=run_probe)


def run_webhook(args: argparse.Namespace) -> int:
    from cloudfs.k8s.kube_api import KubeApi
    from cloudfs.lib.endpoints import parse_host_port
    from cloudfs.lib.serve import serve_until_signal
    from cloudfs.sidecar.review import NativeSidecars, Webhook
    from cloudfs.sidecar.server import WebhookServer
    from cloudfs.sidecar.settings import WebhookConfig
    from cloudfs.tls import load_server_tls

    server_logs.configure(args.debug)
    parse_host_port(args.listen, "--listen")
    tls = load_server_tls(args.tls_cert, args.tls_key)
    assert tls is not None
    hosts = tuple(p.strip().rstrip("/") or "/" for p in args.cache_host_paths.split(",") if p)
    if any(not h.startswith("/") for h in hosts):
        raise UsageError("--cache-host-paths takes absolute directories")
    config = WebhookConfig(
        image=args.image,
        driver=args.driver_name,
        native_sidecars=args.native_sidecars,
        on_error=args.on_error,
        cache_host_paths=hosts,
        cache_size=parse_quantity(args.cache_size),
        drain_timeout=parse_seconds(args.drain_timeout),
    )
    api = KubeApi(args.kube_api) if args.kube_api else KubeApi.in_cluster()
    if api is None:
        raise UsageError("not in a cluster: give the API server with --kube-api URL")
    webhook = Webhook(config, api, NativeSidecars(args.native_sidecars, api))
    try:
        server = WebhookServer(webhook, args.listen, tls)
    except OSError as e:
        raise StartupError(f"--listen {args.listen}: {e}") from None
    serve_until_signal(server, ready=lambda: log.info("sidecar webhook on %s (https)", args.listen))
    return 0


def run_probe(args: argparse.Namespace) -> int:
    from cloudfs.sidecar.probe import problem

    timeout = parse_seconds(args.timeout)
    for path in args.paths:
        why = problem(path, timeout)
        if why is not None:
            print(f"cloudfs sidecar probe: {why}", file=sys.stderr)
            return 1
    return 0
