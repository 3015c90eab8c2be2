"""``cloudfs-csi``: the CloudFS CSI plugin (node, controller, or both) on ``$CSI_ENDPOINT``.

    cloudfs-csi --mode node --node-id "$NODE_NAME" \
        --mounter-socket /run/cloudfs-csi/mounter.sock  # the node DaemonSet's driver
    cloudfs-csi --mode mounter \
        --mounter-socket /run/cloudfs-csi/mounter.sock  # ... and its mounter container
    cloudfs-csi --mode controller                       # next to csi-provisioner

``--tls-ca-file`` (and ``--tls-cert-file``, ``--tls-key-file`` for mutual TLS)
is how the controller and the node reach TLS tree services and cache workers.
The node keeps its state in ``--state-dir`` and the volumes' caches under
``--cache-root``; both must outlive the driver's container (host paths).
Stopping the driver (SIGTERM) leaves every mount in place.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import socket
import sys
import threading

from cloudfs.errors import UsageError
from cloudfs.tls import load_client_tls
from cloudfs_csi import DRIVER_NAME, VERSION
from cloudfs_csi.controller import ControllerService
from cloudfs_csi.fuse_process import FuseLauncher, LocalRunner, Runner
from cloudfs_csi.identity import IdentityService
from cloudfs_csi.mounter import MounterClient
from cloudfs_csi.mounter import serve_forever as serve_mounter
from cloudfs_csi.mounts import MountTable
from cloudfs_csi.node import NodeService
from cloudfs_csi.recovery import HealthLoop
from cloudfs_csi.server import serve
from cloudfs_csi.state import StateStore
from cloudfs_csi.tls import TlsFiles

log = logging.getLogger("cloudfs_csi")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="cloudfs-csi", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--endpoint", default=os.environ.get("CSI_ENDPOINT"),
                   help="unix:///path/csi.sock (default: $CSI_ENDPOINT)")  # fmt: skip
    p.add_argument("--mode", choices=("node", "controller", "all", "mounter"), default="all")
    p.add_argument("--mounter-socket", default=None,
                   help="node: have the mounter on this socket run the FUSE processes "
                   "(default: run them here); mounter: serve on it")  # fmt: skip
    p.add_argument("--node-id", default=os.environ.get("NODE_ID") or socket.gethostname())
    p.add_argument("--driver-name", default=DRIVER_NAME)
    p.add_argument("--state-dir", default="/var/lib/cloudfs-csi",
                   help="node state: what is staged and published where")  # fmt: skip
    p.add_argument("--cache-root", default="/var/cache/cloudfs-csi",
                   help="one cache directory per volume under this")  # fmt: skip
    p.add_argument("--health-interval", type=float, default=10.0,
                   help="seconds between checks of every staged volume (10)")  # fmt: skip
    p.add_argument("--max-volumes", type=int, default=0, help="volumes per node (0: no limit)")
    p.add_argument("--cloudfs-command", default=None,
                   help="how to run the cloudfs CLI (default: this Python's cloudfs)")  # fmt: skip
    p.add_argument("--cache-token-file", default=None,
                   help="node: the cache-group token for volumes with a cache group whose "
                   "node-stage secret has no cacheToken (a path the mount processes can "
                   "read: the mounter's, with --mounter-socket)")  # fmt: skip
    for kind, what in (("ca", "the CA of the tree service's and cache workers' certificates"),
                       ("cert", "a client certificate (mutual TLS; with --tls-key-file)"),
                       ("key", "the client certificate's key")):  # fmt: skip
        p.add_argument(f"--tls-{kind}-file", default=None,
                       help=f"{what}: the controller's for its calls to the tree "
                       "services; the node's for volumes whose node-stage secret gives none "
                       "(a path the driver and the mount processes both read)")  # fmt: skip
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    args = p.parse_args(argv)
    if args.mode == "mounter":
        if not args.mounter_socket:
            p.error("--mode mounter needs --mounter-socket")
    elif not args.endpoint:
        p.error("--endpoint or $CSI_ENDPOINT is required")
    if (args.tls_cert_file is None) != (args.tls_key_file is None):
        p.error("--tls-cert-file and --tls-key-file go together")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    command = shlex.split(args.cloudfs_command) if args.cloudfs_command else None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.mode == "mounter":
        serve_mounter(args.mounter_socket, LocalRunner(command), stop)
        return 0
    identity = IdentityService(controller=args.mode in ("controller", "all"), name=args.driver_name)
    tls_files = TlsFiles(args.tls_ca_file, args.tls_cert_file, args.tls_key_file)
    try:
        load_client_tls(tls_files.ca, tls_files.cert, tls_files.key)  # a bad file: said now
    except UsageError as exc:
        print(f"cloudfs-csi: {exc}", file=sys.stderr)
        return 2
    controller = ControllerService(tls=tls_files) if args.mode in ("controller", "all") else None
    node: NodeService | None = None
    health: HealthLoop | None = None
    if args.mode in ("node", "all"):
        runner: Runner = (
            MounterClient(args.mounter_socket) if args.mounter_socket else LocalRunner(command)
        )
        node = NodeService(
            node_id=args.node_id,
            store=StateStore(args.state_dir),
            table=MountTable(),
            launcher=FuseLauncher(runner),
            cache_root=args.cache_root,
            max_volumes=args.max_volumes,
            cache_token_file=args.cache_token_file,
            tls_files=tls_files,
        )
        health = HealthLoop(node.staged, node.locked, node.repair, args.health_interval)
    try:
        server = serve(args.endpoint, identity=identity, node=node, controller=controller)
    except (ValueError, RuntimeError) as exc:
        print(f"cloudfs-csi: {exc}", file=sys.stderr)
        return 2
    if health is not None:
        health.start()  # re-adopts what an earlier driver staged, then keeps checking
    log.info("%s %s (%s) ready", args.driver_name, VERSION, args.mode)
    stop.wait()
    log.info("stopping; mounts stay in place")
    if health is not None:
        health.stop()
    server.stop(grace=10).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
