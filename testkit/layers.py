"""The layer table of ``cloudfs/``: one row per package (or top-level module), top to bottom.

A module may import its own row and the rows below it, never a row above
(``tests/unit/test_layers.py`` reads the import graph and checks it). The
table in ``docs/architecture.md`` is made from this one
(``python3 -m testkit.architecture``), and a test checks that it was.
``package`` is a dotted prefix: a module belongs to the row with the longest
prefix of its name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    layer: str  # what the rows of one layer have in common
    package: str  # dotted: ``cloudfs.meta.engine``, or a module: ``cloudfs.errors``
    holds: str  # markdown: what is there, file by file


ROWS: tuple[Row, ...] = (
    Row(
        "entry",
        "cloudfs.cli",
        "the command line and nothing else: it parses arguments and calls the packages below. "
        "`main.py` (dispatch, errors -> one line + exit code), `mount.py` + `mount_options.py` "
        "(flags and their `-o` spellings -> `MountConfig`; then `mount.assembly`), `daemon.py` "
        "(fork once the mount is ready; the child reports `OK` or the error on a pipe), "
        "`umount.py`, `flush.py`, `fstab.py` (`mount.fuse.cloudfs`), `warmup.py`, `refresh.py`, "
        "`hint.py`, `stats*.py` (`cloudfs stats`: sources, parsing and rates, JSON, the terminal "
        "view), `volume.py`, `meta_serve.py` (`cloudfs meta serve`), `cache_serve.py` (`cloudfs "
        "cache serve`), `gateway.py` (`cloudfs gateway s3`), `job.py` + `scheduler*.py` (the "
        "embedded scheduler, the extender, the Kueue check), `sidecar.py` (the sidecar webhook "
        "and probe), `tls_flags.py` + `tree_flags.py` "
        "(the TLS and tree-service flags), `server_logs.py`",
    ),
    Row(
        "services beside the mount",
        "cloudfs.jobs",
        "the embedded scheduler ([docs/jobs.md](jobs.md)): `spec.py` + `fields.py` (job YAML, "
        "field-path errors), `config.py` (groups, quotas, borrowing), `policy.py` (pure: which "
        "queued jobs start and why the rest wait), `record.py` + `store.py` (jobs and events in "
        "LMDB), `readiness.py` (mount, check and warm a job's data through the control socket), "
        "`runner.py` + `shim.py` + `procs.py` + `devices.py` + `machine.py` (workers by "
        "framework, watched by pid and start time, stopped as trees), `telemetry.py` (a job's "
        "stall seconds), `scheduler.py` (the loop, recovery), `server.py` + `client.py` (its "
        "socket, started on demand), `report.py`. It drives mounts through processes and the "
        "control socket",
    ),
    Row(
        "services beside the mount",
        "cloudfs.sidecar",
        "sidecar mode ([csi.md](csi.md#node-mode-or-sidecar-mode)): the mutating webhook that "
        "injects the client into a training pod. `settings.py` (the opt-in label, the "
        "annotations, the webhook's flags), `volumes.py` (a pod's CloudFS volumes: PVC -> PV "
        "-> URI, options, Secret keys), `containers.py` (one native sidecar per volume, the "
        "cache and secret volumes), `patch.py` (the patched pod, the JSONPatch, idempotence), "
        "`review.py` (AdmissionReview v1, refusals, events), `server.py` (HTTPS), `probe.py` "
        "(the startup probe), `errors.py`",
    ),
    Row(
        "services beside the mount",
        "cloudfs.k8s",
        "Kubernetes scheduling ([kubernetes-scheduling.md](kubernetes-scheduling.md)): the "
        "kube-scheduler extender (`wire.py`: the Go field names; `pod_volumes.py`: a pod's "
        "CloudFS volumes; `extender.py`: filter and 0-10 scores by cached bytes; `server.py`), "
        "the Kueue data-readiness check (`admission.py`, `admission_controller.py`, "
        "`dataset_sizes.py`, `warmup_job.py`, `tree_view.py`), `kube_api.py` (two GETs with the "
        "service account, timeouts)",
    ),
    Row(
        "services beside the mount",
        "cloudfs.gateway",
        "`cloudfs gateway s3`: volumes served as S3 buckets ([below](#the-s3-gateway)): "
        "`server.py` (HTTP), `sigv4*.py` (who signed the request), `payload.py` + `chunked.py` + "
        "`transfer.py` + `checksums.py` (bodies decoded and verified as read), `routing.py`, "
        "`exchange.py` (one call apart from HTTP), `objects.py`, `multipart.py`, `listing.py` + "
        "`walk.py` + `keys.py` (keys as paths, S3's order), `volumes.py` (a `VolumeHandle` per "
        "bucket), `xmlio.py`, `errors.py` + `faults.py` (the one errno -> S3 code table), "
        "`context.py` (what a gateway process shares)",
    ),
    Row(
        "services beside the mount",
        "cloudfs.fsspec",
        "`cloudfs://VOLUME/path` without a mount ([below](#without-fuse-fsspec)): "
        "`filesystem.py` (`CloudFileSystem`, the `fsspec.specs` entry point), `connections.py` "
        "(handles per process: reopened after a fork), `files.py` (`CloudFile`: reads; writes "
        "staged until close), `errors.py` (`FsError` -> `OSError` of its errno)",
    ),
    Row(
        "mount library",
        "cloudfs.mount",
        "a mount, assembled: `assembly.py` (`mount_filesystem`: every layer built from a "
        "`MountConfig`, each close pushed on one `ExitStack`), `local_tree.py` (the embedded "
        "tree, also served to this node's processes), `local_blocks.py` (blocks served on a "
        "UNIX socket), `cache_group.py` (a mount's cache group: static, listed, served), "
        "`cache_report.py` (what this node caches, told to the tree service every 30 s), "
        "`checks.py` (mountpoint, `/dev/fuse`, cache-dir lock), `runtime.py` (pid file, default "
        "cache root), `malloc.py` (glibc arenas), `option_names.py` (the `-o` vocabulary the CLI "
        "and the CSI driver share). The CLI, the CSI driver and fsspec use it",
    ),
    Row(
        "kernel adapter",
        "cloudfs.fuse",
        "the only importer of pyfuse3: `operations.py` (pyfuse3 `Operations` -> `Vfs`; the only "
        "`FsError` -> `FUSEError` mapping; per-op metrics), `convert.py`, `session.py` (mount "
        "options, serve loop under trio, signals, kernel read-ahead, what the installed pyfuse3 "
        "allows), `invalidator.py` (drops what changed from the kernel's caches)",
    ),
    Row(
        "trainer integration",
        "cloudfs.torch",
        "the public import path of `CloudFSSampler` (`hints/sampler.py`)",
    ),
    Row(
        "trainer integration",
        "cloudfs.hints",
        "the client side, in the trainer's process: `__init__.py` (`announce`, `cached`), "
        "`client.py` (paths -> mounts, one connection each), `cache_first.py`, `naming.py`, "
        "`sampler.py` (`CloudFSSampler` for PyTorch)",
    ),
    Row(
        "trainer integration",
        "cloudfs.epoch",
        "the mount side ([docs/training.md](training.md)): `hint_ops.py` (the hints socket's "
        "handlers), `resolve.py` (paths as the caller may read them), `order.py` (an epoch's "
        "order and the job's position), `board.py` (live jobs: prefetch window, block ranks for "
        "Belady eviction, job end), `telemetry.py` (per-job series), `finished.py` (an ended "
        "job's series, kept marked finished for a grace)",
    ),
    Row(
        "clients without FUSE",
        "cloudfs.client",
        "a volume reached from a process (fsspec, the S3 gateway): `volume.py` (`VolumeHandle`: "
        "one volume's `GrpcMeta`, store and write-through commit), `options.py` (storage "
        "options and `$CLOUDFS_META_*`), `local.py` (`cloudfs:///PATH` under a mount of this "
        "node), `local_mount.py` + `unix_http.py` (blocks through the node's mount), `blocks.py` "
        "(`BlockFetcher`: the mount's block keys, a memory tier, single flight), `readahead.py`, "
        "`names.py` (a short-lived directory cache)",
    ),
    Row(
        "control channel",
        "cloudfs.control",
        "CLI commands <-> a running mount: `protocol.py` (what the control socket carries, over "
        "`lib/jsonlines.py`: a 0600 UNIX socket beside the pid file), `server.py` (served in "
        "the mount's trio loop; streaming requests; a second, shared socket for "
        "`cloudfs.hints`), `client.py` (finds the mount of a path), `paths.py` (pid file and "
        "socket paths), `cache_ops.py`, `refresh_ops.py`, "
        "`describe_ops.py`, `writeback_ops.py` (the handlers), `refresh_tree.py` (`refresh -r`: "
        "the listed directories under one, listed again a few at a time)",
    ),
    Row(
        "POSIX core",
        "cloudfs.vfs",
        "`core.py` (`Vfs`: every operation over the Meta protocol), `files.py` (`FileIO`: "
        "open-file state, open/read/write/flush/release, copy-on-write staging, close-to-open), "
        "`inode_reads.py` (reads by inode in dataset mode), `handles.py`",
    ),
    Row(
        "cache group",
        "cloudfs.peers",
        "mount side: `client.py` (`PeerGroup`, the loader's `PeerTier`: one HTTP GET per missed "
        "block to its owner, a batch at once in `transport.py`'s pool), `ring.py` (rendezvous "
        "hashing), `health.py` (failed members left out for a back-off), `membership.py` "
        "(`GroupHeartbeat`, `GroupWatcher`: a group kept through the tree service); worker side: "
        "`server.py` (`GET /v1/block`), `reply.py` (a block reply read, for the group and the "
        "node's mount alike), `worker.py` (`BlockWorker`: memory -> disk -> one GET "
        "per block for all callers), `flights.py`, `stores.py`; `wire.py` (path, query, "
        "headers, errno <-> HTTP status)",
    ),
    Row(
        "data",
        "cloudfs.data",
        "`blocks.py` (`ObjectRef`, block keys), `reader.py` (`ObjectReader`: the tier walk, "
        "memory -> disk -> UFS, single flight) + `loader.py` (`BlockLoader`: blocks into the "
        "tiers, GETs, the cache group) + `body.py` (a streaming GET's body, block by block) + "
        "`disk_reads.py` (disk hits read in place, on a limiter of their own) + `readahead.py` "
        "+ `prefetch.py` (read-ahead, its budget, the growing window per reader) + `warmup.py` "
        "(fetch on open, warm-up, in a cache group too) + `holdings.py` (what the tiers hold of "
        "an object, evict) + `failfast.py` (a read fails at once after a failed fetch), "
        "`stream.py` (one open GET per sequential reader), `ledger.py` (prefetch used / "
        "wasted), `watch.py`, `staging.py` + `space.py` (`StagedFile`, staging space), "
        "`commit.py` (a closed file into the UFS and the tree), `uploader.py` + `journal.py` "
        "(write-back)",
    ),
    Row(
        "cache",
        "cloudfs.cache",
        "`interface.py` (`BlockTier`; `PeerTier`), `memory.py` (LRU), `disk.py` + "
        "`disk_shard.py` + `blockfile.py` "
        "+ `writebehind.py` (the disk tier: one file per block with a crc32 header, writes "
        "behind the reader), `admission.py` (TinyLFU or LRU), `belady.py` (eviction by next "
        "use), `singleflight.py`, `counters.py`",
    ),
    Row(
        "metadata",
        "cloudfs.meta.service",
        "the tree service's gRPC face (`cloudfs meta serve`): `server.py` (`TreeServer`: "
        "Meta-, Volume-, CacheGroup-, CacheReportService), `calls.py` (each MetaService RPC "
        "as one Meta call), `volumes.py` (named trees in one "
        "engine), `single.py` (a mount's own tree as the only volume), `groups.py`, "
        "`cache_reports.py`, `changes.py` + `change_pump.py` (change feeds, across servers over "
        "etcd), `limits.py` (calls in flight per client), `decoding.py`",
    ),
    Row(
        "metadata",
        "cloudfs.meta.client",
        "the tree service's clients: `grpc_meta.py` (`GrpcMeta`, the Meta protocol over gRPC), "
        "`detached.py` + `answers.py` (`DetachedReads`: reads answered from what the mount "
        "knows while the service is unreachable), `detached_writes.py` + `change_log.py` + "
        "`replay.py` + `listings.py` (`DetachedWrites`: a write-back mount's changes "
        "journaled while it is unreachable, replayed in order under reserved inode numbers), "
        "`volumes.py` (`VolumeClient`), `groups.py` (`GroupClient`), `cache_reports.py` "
        "(`CacheReportClient`), `channel.py` (deadlines, retries, tokens, errors), "
        "`grouped.py` (`GroupedCalls`: calls queued meanwhile sent as one), "
        "`dir_attrs.py` (`KnownDirAttrs`: a directory's attributes as a create left them), "
        "`tree_uri.py` (`grpc://HOST:PORT/VOLUME`)",
    ),
    Row(
        "metadata",
        "cloudfs.meta.embedded",
        "`EmbeddedMeta`: the Meta protocol over a KV engine and a UFS, in process",
    ),
    Row(
        "metadata",
        "cloudfs.meta.engine",
        "the tree engine: the KV protocol (`kv.py`) and its LMDB, memory, prefixed and etcd "
        "engines (`kv_*.py`, `etcd_*.py`), `codec.py` (records), tree operations one file per "
        "concern (`ops_*.py`, `tree.py`), `ufs_sync.py` (a listing merged into a directory), "
        "`loader.py` + `relister.py` (stale directories listed again, in the background for "
        "readers), `ns_lock.py` (the cross-server namespace lock), `reserve.py` "
        "(names a UFS change keeps lock-free creates out of), `inode_numbers.py` (batches "
        "of inode numbers per process)",
    ),
    Row(
        "metadata",
        "cloudfs.meta.wire",
        "what the service and its clients both speak: `constants.py` (service names, metadata "
        "keys, message limits), `convert.py` (values and errors <-> protobuf and gRPC status), "
        "`volumes.py` (`VolumeSpec`, name rules), `groups.py` (group and member rules)",
    ),
    Row(
        "metadata",
        "cloudfs.meta",
        "`interface.py` (the `Meta` protocol every tree implements), `change_queue.py` (what "
        "listings changed, for the kernel)",
    ),
    Row(
        "storage",
        "cloudfs.ufs",
        "`interface.py` (`ObjectStore`), `local.py`, `dirstore.py` (what the stores over a "
        "directory tree share: key paths, temporary files, listing pages, uploads), `s3.py` +"
        " `s3_errors.py` + `s3_stream.py` + `s3_resumable.py` + `s3_native.py` (ranged GETs "
        "and small files' PUTs in native code through obstore, the GIL released) + "
        "`s3_list.py` (a directory's listing page; ListObjectsV2 without botocore's response "
        "pipeline) + `s3_direct.py` (a ranged GET "
        "without botocore's request pipeline, where the native path cannot be had), "
        "`arrow.py` + `arrow_errors.py` (any `pyarrow.fs` filesystem as a store), `hdfs.py` "
        "(HDFS through libhdfs: timeouts, name rules), `forwarding.py` (the base of wrappers:"
        " every method forwarded, each request through one hook), `faults.py` (fault "
        "injection), `metered.py` (metrics around any store), `factory.py` (URI -> store)",
    ),
    Row(
        "shared helpers",
        "cloudfs.lib",
        "one home for what several packages use; above the leaves only: `jsonlines.py` (the "
        "framing of the control, hints and scheduler sockets: a JSON request line, JSON-line "
        "events, one final `done` or `error` line; `JsonLinesClient`, their one client: "
        "connect with a timeout, send, events, an error line as an `FsError` of its errno), "
        "`http_server.py` (`ThreadedHTTPServer` under the cache worker and the S3 gateway: "
        "bounded threads, connections per client host, idle timeout, TLS, TCP or a 0600 UNIX "
        "socket, a graceful `stop`), `loop.py` (`Loop`: a step every few seconds in a thread), "
        "`serve.py` (`serve_until_signal`: a server process until SIGTERM/SIGINT), "
        "`endpoints.py` (`HOST:PORT` flags, the Prometheus endpoint), `gil_free.py` (a "
        "large buffer copied into new `bytes` with the GIL released: cold blocks on their "
        "way to the caches), `locks.py` (`KeyedLocks`: one lock per key, made on demand)",
    ),
    Row("leaves", "cloudfs.config", "frozen configuration (`MountConfig` and its parts)"),
    Row(
        "leaves",
        "cloudfs.tls",
        "TLS for every server and client: `ServerTLS`, `ClientTLS`, `check_listener` "
        "([security.md](security.md))",
    ),
    Row("leaves", "cloudfs.tokens", "bearer tokens: `TokenFile`, re-read when the file changes"),
    Row("leaves", "cloudfs.sizes", "the one size parser (`10G`, `512M`)"),
    Row("leaves", "cloudfs.mountinfo", "the one `/proc/self/mountinfo` parser"),
    Row("leaves", "cloudfs.metrics", "`Metrics`: every Prometheus series, injected"),
    Row("leaves", "cloudfs.types", "value types (`Attr`, `DirEntry`, `InodeId`...)"),
    Row("leaves", "cloudfs.errors", "errno-carrying exceptions"),
    Row("leaves", "cloudfs", "the package's version"),
    Row("generated", "cloudfs.v1", "gRPC stubs made by `proto/generate.sh` from `proto/`"),
    Row(
        "generated",
        "cloudfs.etcdpb",
        "etcd's KV and Watch API (`rpc.proto`, `kv.proto` of etcd 3.5, trimmed), stubs made by "
        "`proto/generate.sh`; only `meta/engine/etcd_*.py` import them",
    ),
)
