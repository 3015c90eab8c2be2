"""Frozen configuration objects, built by the CLI and passed down."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cloudfs.tls import ClientTLS, ServerTLS
    from cloudfs.tokens import Token

MiB = 1024 * 1024
GiB = 1024 * MiB


@dataclass(frozen=True, slots=True)
class S3Config:
    endpoint_url: str | None = None
    region: str | None = None
    # One request waits at most connect_timeout + read_timeout per attempt; with
    # max_attempts the worst case before EIO is about 3 x 15 s plus back-off.
    connect_timeout: float = 5.0
    read_timeout: float = 10.0  # per socket read, not per transfer: large GETs are fine
    max_attempts: int = 3
    multipart_threshold: int = 64 * MiB
    multipart_chunksize: int = 16 * MiB

    def effective_endpoint(self) -> str | None:
        """The endpoint a client will use, as far as this and the environment say (as
        botocore reads them: the option, then AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL)."""
        return (
            self.endpoint_url
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
        )


@dataclass(frozen=True, slots=True)
class CacheConfig:
    cache_dir: str
    block_size: int = 4 * MiB
    memory_bytes: int = 256 * MiB
    disk_bytes: int = 10 * GiB
    readahead_blocks: int = 4
    # "stream": one open GET per sequential reader of a large object (few requests;
    # best where a ranged GET is expensive); "ranges": parallel ranged GETs of one block
    # each (best where one connection is slower than the network, as on AWS S3).
    readahead_mode: str = "stream"
    # Size of each parallel ranged GET: one default block, so its answer is the block
    # itself, not split into new bytes (+9% MiB/s, -15% CPU per GiB on s3rver: RESULTS-cold-cost)
    readahead_part_bytes: int = 4 * MiB
    disk_dirs: tuple[str, ...] = ()  # block cache directories; () = <cache_dir>/blocks
    free_space_ratio: float = 0.1  # keep this fraction of each cache filesystem free
    policy: str = "tinylfu"  # disk-tier admission: "tinylfu" (scan-resistant) or "lru"
    # Announced orders (cloudfs.epoch): how far ahead of a job to fetch, GETs at once.
    order_window_files: int = 512
    order_window_bytes: int = 0  # 0: half the memory tier
    order_parallel: int = 32
    job_series_grace: float = 120.0  # seconds an ended job's series stay, marked finished
    # A cache group (cloudfs/peers): HOST:PORT of each member, asked before the UFS.
    peers: tuple[str, ...] = ()
    # Or a named group whose members the tree service lists (grpc:// mounts only).
    group: str | None = None
    # HOST:PORT where this mount serves its own tiers to the group (None: it does not).
    group_serve: str | None = None


@dataclass(frozen=True, slots=True)
class WriteConfig:
    # "through": close() returns once the object is in the UFS. "back": once the
    # bytes and a journal record are fsync'd in the staging area; an uploader
    # pushes them to the UFS in the background (see cloudfs/data/uploader.py).
    mode: str = "through"
    # seconds after close before uploading: a file rewritten, renamed or unlinked meanwhile
    # (write tmp, rename it over latest) costs no UFS call for the temporary name
    upload_delay: float = 1.0
    upload_deadline: float = 3600.0  # seconds before a stuck upload is reported loudly
    upload_concurrency: int = 4
    drain_timeout: float = 600.0  # seconds unmount waits for the backlog (0: no wait)
    staging_dir: str | None = None  # staged copies and the journal; None: <cache_dir>
    staging_bytes: int = 0  # bound on staged copies + journal; 0: the disk's own
    staging_wait: float = 60.0  # seconds a write waits for room before ENOSPC


@dataclass(frozen=True, slots=True)
class MountConfig:
    ufs_uri: str
    mountpoint: str
    store_id: str  # names the default cache dir and salts every block key
    cache: CacheConfig
    s3: S3Config
    meta_ttl: float = 5.0  # seconds before a listed directory is listed again
    read_only: bool = False
    # "auto": dataset mode (the kernel skips open/flush/release) on read-only
    # mounts where pyfuse3 allows it; "on": required; "off": never.
    dataset_mode: str = "auto"
    allow_other: bool = False
    default_uid: int = 0
    default_gid: int = 0
    file_mode: int = 0o644  # mode of files that came from the UFS
    dir_mode: int = 0o755
    foreground: bool = False
    debug: bool = False
    log_file: str | None = None
    metrics_address: str | None = None  # HOST:PORT of the Prometheus endpoint
    write: WriteConfig = WriteConfig()
    tree_token: Token | None = None  # grpc:// mounts: the tree service's token
    peer_token: Token | None = None  # the cache group's token (cache.peers)
    tls: ClientTLS | None = None  # TLS to the tree service and the cache group's members
    group_serve_tls: ServerTLS | None = None  # what cache.group_serve serves TLS with
    # grpc:// mounts: serve the blocks to this user's other processes on this node
    # (cloudfs.client: fsspec, the S3 gateway) over a UNIX socket (mount/local_blocks.py).
    local_blocks: bool = True
