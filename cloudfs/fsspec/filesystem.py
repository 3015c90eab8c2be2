"""CloudFileSystem: CloudFS volumes as an fsspec filesystem, without FUSE.

``cloudfs://VOLUME/path`` names a path in a volume of the directory-tree
service (``cloudfs volume create``), as ``grpc://HOST:PORT/VOLUME`` mounts it.
Listings and attributes come from the tree, so they agree with every mount of
the volume; bytes come through a ``grpc://`` mount of the volume on the same
node when one runs (its block cache, over its UNIX socket: one cache for every
process, forked DataLoader workers included), else from the volume's object
store through an in-process block cache keyed as the mount keys its blocks;
writes are staged locally and committed on close as the mount's write-through
commits them. ``ls("")`` lists the volumes.

``cloudfs:///ABSOLUTE/PATH`` (no host) names a path under a CloudFS mount on
this node, embedded mounts included: the mount says over its control socket
where its tree is (its own, served on a 0600 UNIX socket, or a ``grpc://``
mount's tree service) and how it keys its blocks (``cloudfs.client.local``);
names keep their leading "/". It needs no tree service and only the mount's
user may use it. What it commits reaches the mount's kernel caches at once.

Storage options: those of ``cloudfs.client.options.client_options``
(``meta_server`` and ``token``, else ``$CLOUDFS_META_SERVER`` and
``$CLOUDFS_META_TOKEN``; ``block_size``, the mount's ``--block-size``, 4M: the
same blocks; ``memory_cache_size``, ``s3_endpoint``, ``s3_region``,
``timeout``, ``local_mount``, False: never read through a mount on this node;
``meta_ttl``, seconds a directory is trusted, 1; ``tls_ca``, ``tls_cert``,
``tls_key``: TLS to the tree service, else ``$CLOUDFS_TLS_CA``...), then
``staging_dir``; ``metrics``, a
``cloudfs.metrics.Metrics`` to count on (not part of the instance's identity),
and ``metrics_address="HOST:PORT"`` to serve them to Prometheus as a mount's
``--metrics`` does: UFS requests and bytes (``cloudfs_ufs_*``), block-cache hits
and misses (``cloudfs_blockcache_*{tier="memory"}``, the hit ratio;
``{tier="mount"}``: blocks the mount served from its tiers, or fetched).

Errors reach callers as the builtin ``OSError`` subclasses of their errno
(``errors.py``). Symbolic links are listed as ``type: "link"`` and not followed.
"""

from __future__ import annotations

import errno
import inspect
import os
import shutil
from datetime import datetime, timezone
from typing import Any, ClassVar

from fsspec.spec import AbstractFileSystem

from cloudfs import mountinfo
from cloudfs.client import local
from cloudfs.client.options import NO_SERVER, client_options
from cloudfs.client.readahead import SequentialReads
from cloudfs.client.volume import Parts, VolumeHandle
from cloudfs.errors import NotFound, StartupError, UsageError
from cloudfs.fsspec.connections import Connections
from cloudfs.fsspec.errors import os_error, translated
from cloudfs.fsspec.files import CloudFile
from cloudfs.lib.endpoints import serve_metrics
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.metrics import Metrics
from cloudfs.types import Attr

PROTOCOL = "cloudfs"
CLIENT_OPTIONS = tuple(inspect.signature(client_options).parameters)


class CloudFileSystem(AbstractFileSystem):  # type: ignore[misc]  # fsspec is untyped
    protocol = PROTOCOL
    root_marker = ""
    _strip_tokenize_options: ClassVar[tuple[str, ...]] = ("metrics",)

    def __init__(
        self,
        *args: Any,
        staging_dir: str | None = None,
        metrics: Metrics | None = None,
        metrics_address: str | None = None,
        **kwargs: Any,
    ) -> None:
        """``kwargs``: ``client_options``' and then fsspec's own (``skip_instance_cache``...)."""
        ours = {name: kwargs.pop(name) for name in CLIENT_OPTIONS if name in kwargs}
        super().__init__(*args, **kwargs)
        try:
            self.options = client_options(**ours)
        except UsageError as e:  # options, not a path: what Python says of a bad argument
            raise ValueError(str(e)) from None
        self.staging_dir = staging_dir
        self.metrics = metrics or Metrics()
        if metrics_address:  # this process's counters; forked workers count their own
            try:
                serve_metrics(metrics_address, self.metrics)
            except (UsageError, StartupError) as e:
                raise ValueError(str(e)) from None
        self._connections = Connections(self._open_volume)

    # -- paths ----------------------------------------------------------------

    def _split(self, path: str) -> tuple[str, Parts]:
        """(volume, names below its root); ``cloudfs:///PATH``: (the mount point of
        the CloudFS mount on this node holding PATH, names below it)."""
        path = self._strip_protocol(path)
        if path.startswith("/"):
            with translated(path):
                mount, parts = local.split_mount_path(path, mountinfo.read())
            return mount.mount_point, parts
        volume, _, rest = path.strip("/").partition("/")
        return volume, tuple(os.fsencode(p) for p in rest.split("/") if p)

    def _name(self, path: str) -> str:
        """The name ls/info/find give back: a mount's path keeps its leading "/"."""
        path = self._strip_protocol(path)
        return path.rstrip("/") if path.startswith("/") else path.strip("/")

    def _open_volume(self, name: str) -> VolumeHandle:
        if name.startswith("/"):  # a mount point (``_split``)
            mount, _ = local.split_mount_path(name, mountinfo.read())
            return local.open_mount(mount, self.options, self.metrics)
        if not self.options.meta_server:
            raise ValueError(NO_SERVER)
        return VolumeHandle(self.options, name, self.metrics)

    def _volume(self, path: str, volume: str) -> VolumeHandle:
        if not volume:
            raise os_error(errno.EISDIR, path, "the root of cloudfs:// holds volumes only")
        with translated(path):
            try:
                return self._connections.volume(volume)
            except NotFound as e:
                if volume.startswith("/"):
                    raise
                raise NotFound(f"no volume {volume!r} on {self.options.meta_server}") from e

    def _info(self, name: str, attr: Attr) -> dict[str, Any]:
        kind = "directory" if attr.is_dir else "file" if attr.is_reg else "other"
        return {
            "name": name,
            "size": attr.size if attr.is_reg else 0,
            "type": "link" if attr.is_symlink else kind,
            "mode": attr.mode,
            "mtime": attr.mtime_ns / 1e9,
            "inode": attr.inode,
            "nlink": attr.nlink,
            "uid": attr.uid,
            "gid": attr.gid,
            "etag": attr.etag,
        }

    # -- listings and attributes ------------------------------------------------

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        volume, parts = self._split(path)
        name = self._name(path)
        if not volume:
            return {"name": "", "size": 0, "type": "directory"}
        handle = self._volume(path, volume)
        with translated(path):
            return self._info(name, handle.resolve(parts))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        volume, parts = self._split(path)
        name = self._name(path)
        if not volume:
            entries = [{"name": v, "size": 0, "type": "directory"} for v in self._volume_names()]
        else:
            handle = self._volume(path, volume)
            with translated(path):
                attr = handle.resolve(parts)
                if not attr.is_dir:
                    entries = [self._info(name, attr)]
                else:
                    entries = [
                        self._info(f"{name}/{os.fsdecode(e.name)}", e.attr)
                        for e in handle.listdir(attr.inode)
                    ]
        return entries if detail else [e["name"] for e in entries]

    def _volume_names(self) -> list[str]:
        if not self.options.meta_server:
            raise ValueError(NO_SERVER)
        with translated(""):
            client = VolumeClient(
                self.options.meta_server,
                token=self.options.token,
                timeout=self.options.timeout,
                tls=self.options.tls,
            )
            try:
                return sorted(spec.name for spec in client.list())
            finally:
                client.close()

    def modified(self, path: str) -> datetime:
        return datetime.fromtimestamp(self.info(path)["mtime"], tz=timezone.utc)

    # -- bytes ------------------------------------------------------------------

    def cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        volume, parts = self._split(path)
        handle = self._volume(path, volume)
        with translated(path):
            ref = handle.object_ref(handle.resolve(parts), parts)
            begin, stop = _range(ref.size, start, end)
            return handle.read(ref, begin, stop)

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> CloudFile:
        volume, parts = self._split(path)
        handle = self._volume(path, volume)
        name = self._strip_protocol(path)
        if mode == "rb":
            with translated(path):
                ref = handle.object_ref(handle.resolve(parts), parts)
            reads = handle.reads(ref)
            return CloudFile(
                self, name, mode, size=ref.size,
                fetch=lambda begin, stop: self._read(reads, path, begin, stop),
                block_size=block_size, cache_options=cache_options, **kwargs,
            )  # fmt: skip
        if mode not in ("wb", "xb", "ab"):
            raise ValueError(f"cloudfs:// files open as rb, wb, xb or ab, not {mode!r}")
        exclusive = mode == "xb"
        with translated(path):
            handle.check_target(parts, exclusive=exclusive)
        initial = None
        if mode == "ab" and self.exists(path):
            initial = self._open(path, "rb")._fetch_range

        def commit(staged: str) -> None:
            with translated(path):
                handle.commit(parts, staged, exclusive=exclusive)

        return CloudFile(
            self, name, mode, commit=commit, initial=initial, staging_dir=self.staging_dir,
            block_size=block_size, autocommit=autocommit, cache_options=cache_options,
            **kwargs,
        )  # fmt: skip

    @staticmethod
    def _read(reads: SequentialReads, path: str, begin: int, stop: int) -> bytes:
        with translated(path):
            return reads(begin, stop) if begin < stop else b""

    # -- namespace changes --------------------------------------------------------

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        volume, parts = self._split(path)
        if create_parents:
            if self.exists(path):
                raise os_error(errno.EEXIST, path)
            self.makedirs(path, exist_ok=True)
            return
        handle = self._volume(path, volume)
        with translated(path):
            handle.mkdir(parts)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        volume, parts = self._split(path)
        handle = self._volume(path, volume)
        if not exist_ok and self.exists(path):
            raise os_error(errno.EEXIST, path)
        with translated(path):
            handle.makedirs(parts)

    def rm_file(self, path: str) -> None:
        volume, parts = self._split(path)
        handle = self._volume(path, volume)
        with translated(path):
            if not parts:
                raise os_error(errno.EPERM, path, "cannot remove a volume's root")
            handle.remove(parts)

    def rmdir(self, path: str) -> None:
        if self.info(path)["type"] != "directory":
            raise os_error(errno.ENOTDIR, path)
        self.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        """Files, and directories once emptied (deepest first); ``recursive`` for trees."""
        paths = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        for p in sorted(paths, key=lambda p: p.count("/"), reverse=True):
            self.rm_file(p)

    def mv(
        self,
        path1: Any,
        path2: Any,
        recursive: bool = False,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """One path: a rename in the tree (objects moved in the UFS; a directory with all
        below it); into ``path2`` when that is a directory. Lists and globs: fsspec's
        copy, then remove."""
        if not isinstance(path1, str) or not isinstance(path2, str) or self._has_magic(path1):
            super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
            return
        volume, src = self._split(path1)
        other, dst = self._split(path2)
        if other != volume:
            super().mv(path1, path2, recursive=True, maxdepth=maxdepth, **kwargs)
            return
        if self._strip_protocol(path1) == self._strip_protocol(path2):
            return
        if self.isdir(path2) and src:
            dst = (*dst, src[-1])
        handle = self._volume(path1, volume)
        with translated(path1):
            handle.rename(src, dst)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        if self.isdir(path1):
            self.makedirs(path2, exist_ok=True)
            return
        with self.open(path1, "rb") as src, self.open(path2, "wb") as dst:
            shutil.copyfileobj(src, dst, length=self.options.block_size)

    @staticmethod
    def _has_magic(path: str) -> bool:
        return any(c in path for c in "*?[")

    def close(self) -> None:
        """Close this process's connections (the object stays usable: they reopen)."""
        self._connections.close()


def _range(size: int, start: int | None, end: int | None) -> tuple[int, int]:
    """fsspec's ``cat_file`` range: negative offsets count from the end, clipped."""
    begin = 0 if start is None else start + size if start < 0 else start
    stop = size if end is None else end + size if end < 0 else end
    return max(0, min(begin, size)), max(0, min(stop, size))
