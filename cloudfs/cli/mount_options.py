"""``cloudfs mount`` options: the argparse flags and their ``-o name=value`` spellings.

fstab passes options as one ``-o a,b=c`` string; each CloudFS flag has an
``-o`` name (``--cache-size 10G`` is ``-o cache_size=10G``). Options that only
mount(8) cares about are accepted and ignored.
"""

from __future__ import annotations

import argparse

from cloudfs.errors import UsageError
from cloudfs.mount.option_names import IGNORED, O_OPTIONS

READAHEAD_MODES = ("stream", "ranges")
WRITE_MODES = ("through", "back")
DATASET_MODES = ("auto", "on", "off")
# --meta-ttl when not given: short where this mount's own opens and closes are
# the consistency points, long in dataset mode, where changes are pushed.
META_TTL_DEFAULT = 5.0
META_TTL_DATASET_DEFAULT = 300.0

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "ufs_uri",
        metavar="UFS_URI",
        help="s3://bucket[/prefix], hdfs://namenode:port/dir, file:///dir, or a tree-service "
        "volume grpc://HOST:PORT/VOLUME",
    )
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    p.add_argument("-f", "--foreground", action="store_true", help="stay in the foreground")
    p.add_argument(
        "-o",
        dest="options",
        action="append",
        default=[],
        metavar="OPT[,OPT...]",
        help="mount options, as in fstab (cache_size=10G,ro,allow_other,...)",
    )
    p.add_argument(
        "--cache-dir",
        help="cache and tree directory (default: per-UFS under "
        "/var/cache/cloudfs or ~/.cache/cloudfs)",
    )
    p.add_argument("--cache-size", default="10G", help="disk block cache limit (10G)")
    p.add_argument(
        "--block-cache-dirs",
        metavar="DIR[:DIR...]",
        help="disk block cache directories, e.g. one per SSD; --cache-size is split "
        "evenly (default: CACHE_DIR/blocks)",
    )
    p.add_argument(
        "--free-space-ratio",
        default="0.1",
        help="fraction of each block cache filesystem kept free (0.1)",
    )
    p.add_argument(
        "--cache-policy",
        default="tinylfu",
        help="disk cache admission: tinylfu (scan-resistant: a dataset larger than the "
        "cache keeps the part that fits) or lru (tinylfu)",
    )
    p.add_argument("--memory-cache-size", default="256M", help="memory block cache limit (256M)")
    p.add_argument("--block-size", default="4M", help="cache block size (4M)")
    p.add_argument("--readahead-blocks", default="8", help="read-ahead window in blocks (8)")
    p.add_argument(
        "--readahead-mode",
        default="stream",
        choices=READAHEAD_MODES,
        help="stream: one open GET per sequential reader of a large file; ranges: parallel "
        "ranged GETs of one block each, for stores where one connection is slower than the "
        "network (stream)",
    )
    p.add_argument(
        "--order-window-files",
        default="512",
        help="files fetched ahead of a job along the order it announced, not read yet (512)",
    )
    p.add_argument(
        "--order-window-size",
        default=None,
        help="bytes a job's prefetch may hold in memory (half the memory cache)",
    )
    p.add_argument(
        "--order-parallel",
        default="32",
        help="GETs in flight for each job's announced order (32)",
    )
    p.add_argument(
        "--job-series-grace",
        default="120",
        metavar="SECONDS",
        help="seconds an ended job's cloudfs_job_* series stay, marked finished, so a "
        "scrape after a short job reads its final figures (120; 0: drop them at once)",
    )
    p.add_argument(
        "--write-mode",
        default="through",
        choices=WRITE_MODES,
        help="through: close() returns once the file is in the UFS; back: once it is "
        "durable in the local staging journal, uploaded in the background (through)",
    )
    p.add_argument(
        "--upload-delay", default="1", help="write-back: seconds to wait before uploading (1)"
    )
    p.add_argument(
        "--upload-deadline",
        default="3600",
        help="write-back: seconds after which a file still not uploaded is reported (3600)",
    )
    p.add_argument(
        "--upload-concurrency",
        default="4",
        help="write-back: uploads of large files at once, and of small ones (4; 12 more small "
        "ones once closes pause)",
    )
    p.add_argument(
        "--drain-timeout",
        default="600",
        help="write-back: seconds unmount waits for pending uploads; what is left is "
        "uploaded by the next mount (600)",
    )
    p.add_argument(
        "--token-file", help="grpc:// mounts: the tree service's token (or $CLOUDFS_META_TOKEN)"
    )
    p.add_argument(
        "--cache-peers",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="a cache group: ask each block's owner among these cache workers (cloudfs cache "
        "serve) before the UFS; the same list, spelt alike, on every mount (-o cache_peers=A+B)",
    )
    p.add_argument(
        "--cache-group",
        metavar="NAME",
        help="grpc:// mounts: a cache group whose members (cache workers, serving mounts) "
        "the tree service lists, looked up again every few seconds; ask each block's owner "
        "among them before the UFS (-o cache_group=NAME)",
    )
    p.add_argument(
        "--cache-group-serve",
        metavar="HOST:PORT",
        help="serve this mount's own memory and disk cache (its own volume only) to the "
        "group on HOST:PORT, an address the other nodes can reach, and join --cache-group "
        "as that member; off for short-lived pods (-o cache_group_serve=HOST:PORT)",
    )
    p.add_argument(
        "--cache-group-serve-cert",
        metavar="FILE",
        help="serve --cache-group-serve over TLS with this certificate (needed with --tls-ca) "
        "(-o cache_group_serve_cert=FILE)",
    )
    p.add_argument(
        "--cache-group-serve-key",
        metavar="FILE",
        help="its private key (-o cache_group_serve_key=FILE)",
    )
    p.add_argument(
        "--take-over-dead-mount",
        action="store_true",
        help="if MOUNTPOINT holds a CloudFS mount whose process is gone (ENOTCONN), detach it "
        "and mount in its place: a restarted sidecar (-o take_over_dead_mount)",
    )
    p.add_argument(
        "--no-local-blocks",
        action="store_true",
        help="grpc:// mounts: do not serve this mount's cached blocks to this user's other "
        "processes on the node (cloudfs:// through fsspec reads through them otherwise, "
        "over a UNIX socket in the runtime directory) (-o no_local_blocks)",
    )
    p.add_argument(
        "--cache-token-file",
        help="the cache group's token (or $CLOUDFS_CACHE_TOKEN)",
    )
    p.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="TLS to the tree service and cache workers, whose certificates this CA signed "
        "(-o tls_ca=FILE, $CLOUDFS_TLS_CA)",
    )
    p.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="present this client certificate (mTLS) (-o tls_cert=FILE, $CLOUDFS_TLS_CERT)",
    )
    p.add_argument(
        "--tls-key", metavar="FILE", help="its private key (-o tls_key=FILE, $CLOUDFS_TLS_KEY)"
    )
    # The spelling every other client of the tree service uses (cli/tree_flags.py), accepted
    # here too; a mount's --tls-* cover its cache workers as well, so they stay its own.
    p.add_argument("--meta-token-file", dest="token_file", help=argparse.SUPPRESS)
    for part in ("ca", "cert", "key"):
        p.add_argument(f"--meta-tls-{part}", dest=f"tls_{part}", help=argparse.SUPPRESS)
    p.add_argument(
        "--staging-dir",
        help="where files being written and the write-back journal live: a local disk or a "
        "shared path, one per mount (default: CACHE_DIR)",
    )
    p.add_argument(
        "--staging-size",
        default="0",
        help="bound on the staging area (files being written plus uploads not done); "
        "0: the disk's own (0)",
    )
    p.add_argument(
        "--staging-wait",
        default="60",
        help="seconds a write waits for uploads to free staging space before ENOSPC (60)",
    )
    p.add_argument(
        "--meta-ttl",
        default=None,
        help="seconds before a directory is listed "
        "again from the UFS, and the kernel's attribute timeout (5; 300 in dataset mode)",
    )
    p.add_argument("--read-only", action="store_true", help="refuse every change (EROFS)")
    p.add_argument(
        "--dataset-mode",
        default="auto",
        choices=DATASET_MODES,
        help="read-only mounts: the kernel serves warm files without asking the mount "
        "(no open/flush/release; changes are pushed to it). auto: when --read-only and "
        "the patched pyfuse3 is installed; on: insist; off: never",
    )
    p.add_argument("--allow-other", action="store_true", help="let other users use the mount")
    p.add_argument("--uid", help="owner of UFS files that have none in the tree (mount user)")
    p.add_argument("--gid", help="group of UFS files that have none in the tree (mount group)")
    p.add_argument("--file-mode", default="0644", help="mode of UFS files (0644)")
    p.add_argument("--dir-mode", default="0755", help="mode of UFS directories (0755)")
    p.add_argument("--s3-endpoint", help="S3 endpoint URL (default: AWS config/environment)")
    p.add_argument("--s3-region", help="S3 region (default: AWS config/environment)")
    p.add_argument(
        "--s3-timeout",
        default="10",
        help="seconds an S3 request may wait for "
        "data before it is retried (3 attempts, then EIO) (10)",
    )
    p.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics here")
    p.add_argument("--log-file", help="log file (default: CACHE_DIR/cloudfs.log in background)")
    p.add_argument("--debug", action="store_true", help="verbose logging")  # fmt: skip


def apply_o_options(args: argparse.Namespace) -> None:
    """Fold every ``-o`` string into ``args``, as if given as flags."""
    for group in args.options:
        for item in filter(None, (part.strip() for part in group.split(","))):
            name, sep, value = item.partition("=")
            if name in IGNORED or name.startswith("x-") or name.startswith("comment="):
                continue
            if name not in O_OPTIONS:
                raise UsageError(f"unknown mount option {name!r}")
            dest, takes_value = O_OPTIONS[name]
            if takes_value and not sep:
                raise UsageError(f"mount option {name!r} needs a value ({name}=...)")
            if not takes_value and sep:
                raise UsageError(f"mount option {name!r} takes no value")
            setattr(args, dest, value if takes_value else True)
