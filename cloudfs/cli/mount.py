"""``cloudfs mount UFS_URI MOUNTPOINT``: options -> MountConfig -> a running mount."""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from cloudfs.cache.admission import POLICIES
from cloudfs.cli import mount_options, tls_flags
from cloudfs.cli.daemon import run_detached
from cloudfs.cli.meta_serve import is_loopback, read_token
from cloudfs.config import CacheConfig, MountConfig, S3Config, WriteConfig
from cloudfs.errors import FsError, UsageError
from cloudfs.lib.endpoints import parse_host_port, parse_members
from cloudfs.meta.client.tree_uri import TreeUri, is_tree_uri, parse_tree_uri
from cloudfs.meta.wire.groups import validate_group_name, validate_member_address
from cloudfs.mount import checks, runtime
from cloudfs.sizes import parse_mode, parse_seconds, parse_size
from cloudfs.tls import ClientTLS, ServerTLS, load_server_tls
from cloudfs.ufs.factory import store_id, validate_uri


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "mount", help="mount an S3 bucket or a directory", description=__doc__
    )
    mount_options.add_arguments(p)
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace) -> MountConfig:
    mount_options.apply_o_options(args)
    tree = parse_tree_uri(args.ufs_uri) if is_tree_uri(args.ufs_uri) else None
    if tree is None:
        validate_uri(args.ufs_uri)
    mountpoint = os.path.realpath(args.mountpoint)
    s3 = S3Config(
        endpoint_url=args.s3_endpoint,
        region=args.s3_region,
        read_timeout=parse_seconds(str(args.s3_timeout)),
    )
    # One bucket name on two endpoints is two stores: two caches, two trees.
    endpoint = s3.effective_endpoint() if args.ufs_uri.startswith("s3:") else None
    volume_id = tree.cache_id if tree is not None else store_id(args.ufs_uri, endpoint)
    cache_dir = args.cache_dir or str(runtime.default_cache_root() / volume_id)
    block_size = parse_size(args.block_size)
    if block_size < 64 * 1024 or block_size > 64 * 1024 * 1024:
        raise UsageError("block size must be between 64K and 64M")
    if args.readahead_mode not in mount_options.READAHEAD_MODES:  # -o bypasses choices
        raise UsageError(
            f"--readahead-mode must be one of {', '.join(mount_options.READAHEAD_MODES)}"
        )
    if args.write_mode not in mount_options.WRITE_MODES:
        raise UsageError(f"--write-mode must be one of {', '.join(mount_options.WRITE_MODES)}")
    if args.dataset_mode not in mount_options.DATASET_MODES:
        raise UsageError(f"--dataset-mode must be one of {', '.join(mount_options.DATASET_MODES)}")
    if args.dataset_mode == "on" and not args.read_only:
        raise UsageError("--dataset-mode on needs --read-only")
    if args.meta_ttl is not None:
        meta_ttl = parse_seconds(str(args.meta_ttl))
    elif args.read_only and args.dataset_mode != "off":
        meta_ttl = mount_options.META_TTL_DATASET_DEFAULT
    else:
        meta_ttl = mount_options.META_TTL_DEFAULT
    if args.cache_policy not in POLICIES:
        raise UsageError(f"--cache-policy must be one of {', '.join(POLICIES)}")
    try:
        readahead = int(args.readahead_blocks)
        order_files = int(args.order_window_files)
        order_parallel = int(args.order_parallel)
        upload_concurrency = int(args.upload_concurrency)
        free_space_ratio = float(args.free_space_ratio)
        uid = int(args.uid) if args.uid is not None else os.getuid()
        gid = int(args.gid) if args.gid is not None else os.getgid()
    except ValueError as e:
        raise UsageError(f"expected a number: {e}") from None
    if not 0.0 <= free_space_ratio < 1.0:
        raise UsageError("--free-space-ratio must be at least 0 and below 1")
    if upload_concurrency < 1:
        raise UsageError("--upload-concurrency must be at least 1")
    if order_files < 1 or order_parallel < 1:
        raise UsageError("--order-window-files and --order-parallel must be at least 1")
    order_bytes = parse_size(str(args.order_window_size)) if args.order_window_size else 0
    try:
        job_series_grace = parse_seconds(str(args.job_series_grace))
    except UsageError as e:
        raise UsageError(f"--job-series-grace: {e}") from None
    write = WriteConfig(
        mode=args.write_mode,
        upload_delay=parse_seconds(str(args.upload_delay)),
        upload_deadline=parse_seconds(str(args.upload_deadline)),
        upload_concurrency=upload_concurrency,
        drain_timeout=parse_seconds(str(args.drain_timeout)),
        staging_dir=os.path.abspath(args.staging_dir) if args.staging_dir else None,
        staging_bytes=parse_size(str(args.staging_size)),
        staging_wait=parse_seconds(str(args.staging_wait)),
    )
    block_dirs = tuple(os.path.abspath(d) for d in (args.block_cache_dirs or "").split(":") if d)
    peers = parse_members(args.cache_peers, "--cache-peers") if args.cache_peers else ()
    group, group_serve = _group_options(args, tree)
    tls = tls_flags.client_tls(args.tls_ca, args.tls_cert, args.tls_key)
    peer_token = read_token(args.cache_token_file) or os.environ.get("CLOUDFS_CACHE_TOKEN") or None
    if group_serve and peer_token is None and not is_loopback(group_serve):
        raise UsageError("--cache-group-serve beyond loopback needs --cache-token-file")
    return MountConfig(
        ufs_uri=args.ufs_uri,
        mountpoint=mountpoint,
        cache=CacheConfig(
            cache_dir=os.path.abspath(cache_dir),
            block_size=block_size,
            memory_bytes=parse_size(args.memory_cache_size),
            disk_bytes=parse_size(args.cache_size),
            readahead_blocks=max(readahead, 0),
            readahead_mode=args.readahead_mode,
            disk_dirs=block_dirs,
            free_space_ratio=free_space_ratio,
            policy=args.cache_policy,
            order_window_files=order_files,
            order_window_bytes=order_bytes,
            order_parallel=order_parallel,
            job_series_grace=job_series_grace,
            peers=peers,
            group=group,
            group_serve=group_serve,
        ),
        s3=s3,
        store_id=volume_id,
        meta_ttl=meta_ttl,
        read_only=bool(args.read_only),
        dataset_mode=args.dataset_mode,
        allow_other=bool(args.allow_other),
        default_uid=uid,
        default_gid=gid,
        file_mode=parse_mode(str(args.file_mode)),
        dir_mode=parse_mode(str(args.dir_mode)),
        foreground=bool(args.foreground),
        debug=bool(args.debug),
        log_file=args.log_file,
        metrics_address=args.metrics,
        write=write,
        tree_token=read_token(args.token_file) or os.environ.get("CLOUDFS_META_TOKEN") or None,
        peer_token=peer_token,
        tls=tls,
        group_serve_tls=_group_serve_tls(args, group_serve, tls),
        local_blocks=not args.no_local_blocks,
    )


def _group_options(args: argparse.Namespace, tree: TreeUri | None) -> tuple[str | None, str | None]:
    """``--cache-group`` and ``--cache-group-serve``, checked: (group, served HOST:PORT)."""
    group: str | None = args.cache_group or None
    serve: str | None = args.cache_group_serve or None
    if group is not None:
        if args.cache_peers:
            raise UsageError("give --cache-group or --cache-peers, not both")
        if tree is None:
            raise UsageError(
                "--cache-group needs a grpc://HOST:PORT/VOLUME mount (the tree service lists "
                "the group); name the members with --cache-peers otherwise"
            )
        try:
            validate_group_name(group)
        except FsError as e:
            raise UsageError(f"--cache-group: {e}") from None
    if serve is not None:
        if group is None and not args.cache_peers:
            raise UsageError("--cache-group-serve needs --cache-group or --cache-peers")
        host, port = parse_host_port(serve, "--cache-group-serve")
        serve = f"{host}:{port}"
        try:
            validate_member_address(serve)
        except FsError:
            raise UsageError(
                f"--cache-group-serve {serve}: name an address the other nodes can reach "
                "(not 0.0.0.0 or [::]) and a port (not 0); the mount listens there"
            ) from None
    return group, serve


def _group_serve_tls(
    args: argparse.Namespace, serve: str | None, tls: ClientTLS | None
) -> ServerTLS | None:
    """The certificate ``--cache-group-serve`` serves with: required where the mount
    reaches the group's members over TLS (they reach it the same way)."""
    cert, key = args.cache_group_serve_cert, args.cache_group_serve_key
    if (cert is None) != (key is None):
        raise UsageError("--cache-group-serve-cert and --cache-group-serve-key go together")
    if cert is not None and serve is None:
        raise UsageError("--cache-group-serve-cert goes with --cache-group-serve")
    if serve is not None and cert is None and tls is not None:
        raise UsageError(
            "--cache-group-serve with --tls-ca: the group's members speak TLS, so give "
            "--cache-group-serve-cert and --cache-group-serve-key"
        )
    return load_server_tls(cert, key)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    checks.check_mountpoint(config.mountpoint, take_over_dead=args.take_over_dead_mount)
    checks.check_fuse_device()
    from cloudfs.mount.assembly import mount_filesystem  # heavy imports after validation

    if config.foreground:
        _setup_logging(config, foreground=True)
        return mount_filesystem(config)()

    def prepare() -> Any:
        _setup_logging(config, foreground=False)
        return mount_filesystem(config)

    return run_detached(prepare)


def _setup_logging(config: MountConfig, *, foreground: bool) -> None:
    level = logging.DEBUG if config.debug else logging.INFO
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    if foreground and not config.log_file:
        logging.basicConfig(level=level, format=fmt)
        return
    path = config.log_file or os.path.join(config.cache.cache_dir, "cloudfs.log")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    logging.basicConfig(level=level, format=fmt, filename=path)
