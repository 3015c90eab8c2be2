"""VolumeHandle: one volume of the tree service, as one process reaches it.

Metadata goes through the tree client a ``grpc://`` mount uses (``GrpcMeta``),
so names, sizes and versions are the ones every mount of the volume sees; the
bytes go through the volume's object store, opened from the volume's record
as a mount opens it, and through a ``BlockFetcher`` salted as that mount
salts its block keys, which reads through such a mount on this node when one
runs (``LocalMount``).

Writes follow the mount's write-through (``data/commit.py``): the name is
created in the tree (or found), the staged file is uploaded whole as the
name's object (atomic for readers: old bytes or new ones), and only then is
its version committed (``CommitUpload``), both under a per-file lock of this
process (``KeyedLocks``): two overlapping commits could otherwise record the version
whose upload was overwritten. A reader of the tree sees an empty,
unversioned file until then, never part of the new bytes; a failed upload of a
new file removes the name again. Parents missing on the way are created, as an
object store's implicit directories would be.

gRPC channels and boto3 sessions do not survive ``fork``: a handle belongs to
the process that opened it (``connections.py`` opens a new one after a fork).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import time

from cloudfs.cache.memory import MemoryBlockCache
from cloudfs.client.blocks import BlockFetcher
from cloudfs.client.local_mount import LocalMount
from cloudfs.client.names import DirectoryCache
from cloudfs.client.options import ClientOptions
from cloudfs.client.readahead import SequentialReads
from cloudfs.data.blocks import ObjectRef
from cloudfs.errors import (
    AlreadyExists,
    FsError,
    InvalidArgument,
    IsADirectory,
    NotADirectory,
    NotFound,
)
from cloudfs.lib.locks import KeyedLocks
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.meta.client.volumes import VolumeClient
from cloudfs.metrics import Metrics
from cloudfs.types import ROOT_INODE, Attr, DirEntry, InodeId
from cloudfs.ufs.factory import open_store
from cloudfs.ufs.metered import MeteredObjectStore

log = logging.getLogger(__name__)

FILE_MODE = stat.S_IFREG | 0o644
DIR_MODE = stat.S_IFDIR | 0o755
READDIR_PAGE = 1000

Parts = tuple[bytes, ...]  # the path's names below the volume's root
# Below a cached directory, what a dead inode answers: resolve again from the root.
STALE_BELOW = (errno.ENOENT, errno.ENOTDIR, errno.ESTALE)


class VolumeHandle:
    def __init__(self, options: ClientOptions, volume: str, metrics: Metrics) -> None:
        """Looks the volume up (``NotFound`` for an unknown one) and opens its store."""
        tree = options.tree(volume)
        client = VolumeClient(
            tree.address, token=options.token, timeout=options.timeout, tls=options.tls
        )
        try:
            spec = client.get(volume)
        finally:
            client.close()
        self.name = volume
        self.ufs_uri = spec.ufs_uri
        self.meta = GrpcMeta(
            tree.address, volume, token=options.token, timeout=options.timeout, tls=options.tls
        )
        self.store = MeteredObjectStore(open_store(spec.ufs_uri, options.s3), metrics)
        memory = MemoryBlockCache(options.memory_bytes, metrics)
        local = None
        if options.local_mount:  # a grpc:// mount of the volume salts as tree.cache_id
            local = LocalMount(tree.cache_id, spec.ufs_uri, options.block_size, metrics)
        self.blocks = BlockFetcher(self.store, memory, tree.cache_id, options.block_size, local)
        self._dirs = DirectoryCache(options.meta_ttl)
        self._commits = KeyedLocks()

    @classmethod
    def from_parts(
        cls,
        name: str,
        ufs_uri: str,
        meta: GrpcMeta,
        store: MeteredObjectStore,
        blocks: BlockFetcher,
        meta_ttl: float,
    ) -> VolumeHandle:
        """A handle built from pieces another way found (``cloudfs.client.local``: a mount
        on this node says where its tree is and how it salts its blocks)."""
        handle = cls.__new__(cls)
        handle.name = name
        handle.ufs_uri = ufs_uri
        handle.meta = meta
        handle.store = store
        handle.blocks = blocks
        handle._dirs = DirectoryCache(meta_ttl)
        handle._commits = KeyedLocks()
        return handle

    def close(self) -> None:
        self.meta.close()
        self.blocks.close()

    # -- names ----------------------------------------------------------------

    def resolve(self, parts: Parts) -> Attr:
        """The attributes of the path (symlinks are not followed): the last name's
        from the tree, its directories' from ``DirectoryCache`` where fresh."""
        if not parts:
            return self.meta.getattr(ROOT_INODE)
        depth, start = self._dirs.deepest(parts[:-1])
        try:
            return self._walk(parts, depth, start)
        except FsError as e:
            if depth == 0 or e.errno not in STALE_BELOW:
                raise
            self._dirs.forget(parts[:depth])  # gone since: ask the tree from the root
            return self._walk(parts, 0, None)

    def _walk(self, parts: Parts, depth: int, start: Attr | None) -> Attr:
        """Look ``parts[depth:]`` up from ``start`` (``parts[:depth]``; None: the root)."""
        attr = start
        for i in range(depth, len(parts)):
            if attr is not None and not attr.is_dir:
                raise NotADirectory()
            attr = self.meta.lookup(attr.inode if attr else ROOT_INODE, parts[i])
            self._dirs.put(parts[: i + 1], attr)
        assert attr is not None  # parts is not empty
        return attr

    def listdir(self, inode: InodeId) -> list[DirEntry]:
        entries: list[DirEntry] = []
        while True:
            after = entries[-1].name if entries else None
            page = self.meta.readdir(inode, after, READDIR_PAGE)
            entries.extend(page)
            if len(page) < READDIR_PAGE:
                return entries

    def makedirs(self, parts: Parts) -> InodeId:
        """The directory at ``parts``, made with its missing parents (another writer
        making one at the same time is fine)."""
        inode = ROOT_INODE
        for i, name in enumerate(parts):
            try:
                attr = self.meta.lookup(inode, name)
            except NotFound:
                try:
                    attr = self.meta.mkdir(inode, name, DIR_MODE, os.getuid(), os.getgid())
                except AlreadyExists:
                    attr = self.meta.lookup(inode, name)
            if not attr.is_dir:
                raise NotADirectory(f"{os.fsdecode(name)} is not a directory")
            self._dirs.put(parts[: i + 1], attr)
            inode = attr.inode
        return inode

    def mkdir(self, parts: Parts) -> None:
        parent = self.resolve(parts[:-1])
        if not parent.is_dir:
            raise NotADirectory()
        self.meta.mkdir(parent.inode, parts[-1], DIR_MODE, os.getuid(), os.getgid())

    def remove(self, parts: Parts) -> None:
        """Unlink a file or remove an empty directory (the tree deletes the object)."""
        parent = self.resolve(parts[:-1])
        attr = self.meta.lookup(parent.inode, parts[-1])
        if attr.is_dir:
            self._dirs.forget(parts)
            self.meta.rmdir(parent.inode, parts[-1])
        else:
            self.meta.unlink(parent.inode, parts[-1])

    def rename(self, src: Parts, dst: Parts) -> None:
        """POSIX rename in the tree, which moves the objects in the UFS."""
        if not src or not dst:
            raise InvalidArgument("cannot move a volume's root")
        src_parent = self.resolve(src[:-1])
        self.meta.lookup(src_parent.inode, src[-1])  # NotFound before anything is made
        dst_parent = self.makedirs(dst[:-1])
        self._dirs.forget(src)
        self._dirs.forget(dst)  # a directory it replaces
        self.meta.rename(src_parent.inode, src[-1], dst_parent, dst[-1])

    # -- bytes ----------------------------------------------------------------

    def object_ref(self, attr: Attr, parts: Parts) -> ObjectRef:
        """The object version that holds the bytes of the file at ``parts`` now."""
        if not attr.is_reg:
            raise IsADirectory() if attr.is_dir else InvalidArgument("not a regular file")
        if not attr.etag:
            if attr.size:  # a mount's write-back journal holds them until the upload
                raise FsError("the file's bytes are not uploaded yet", errno=errno.EBUSY)
            return ObjectRef("", "", 0)
        return ObjectRef(self._object_key(attr, parts), attr.etag, attr.size)

    def _object_key(self, attr: Attr, parts: Parts) -> str:
        """A file's key is its path (``Meta.object_key``): the tree is asked only for a
        file with several names, whose key is its first name's."""
        if attr.nlink == 1:  # the tree's own spelling of names in keys (names.py)
            return "/".join(name.decode("utf-8", "surrogateescape") for name in parts)
        return self.meta.object_key(attr.inode)

    def read(self, ref: ObjectRef, start: int, end: int) -> bytes:
        if ref.size == 0:
            return b""
        return self.blocks.read(ref, start, end)

    def reads(self, ref: ObjectRef, at: int = 0, limit: int | None = None) -> SequentialReads:
        """``read`` for one open file: sequential reads (from ``at``) have what follows
        fetched ahead, up to ``limit`` (None: the end)."""
        return SequentialReads(self.blocks, ref, at=at, limit=limit)

    def check_target(self, parts: Parts, *, exclusive: bool) -> None:
        """Fail now, before anything is staged, where ``commit`` would fail for the
        name: a parent that is a file, the name a directory, or taken (``exclusive``)."""
        if not parts:
            raise IsADirectory()
        attr = self.meta.getattr(ROOT_INODE)
        for i, name in enumerate(parts):
            if not attr.is_dir:
                raise NotADirectory()
            try:
                attr = self.meta.lookup(attr.inode, name)
            except NotFound:
                return
            if i == len(parts) - 1:
                if attr.is_dir:
                    raise IsADirectory()
                if exclusive:
                    raise AlreadyExists()

    def commit(self, parts: Parts, staged: str, *, exclusive: bool) -> Attr:
        """Write-through: the staged file ``staged`` becomes the file at ``parts``.

        Commits of one file by this process's threads run one at a time, upload and
        tree commit together: two overlapping would otherwise let the tree record the
        version whose upload was overwritten, and the file's reads would fail until
        its next write."""
        parent = self.makedirs(parts[:-1])
        name = parts[-1]
        created = False
        try:
            attr = self.meta.create(parent, name, FILE_MODE, os.getuid(), os.getgid())
            created = True
        except AlreadyExists:
            if exclusive:
                raise
            attr = self.meta.lookup(parent, name)
            if attr.is_dir:
                raise IsADirectory() from None
            if not attr.is_reg:
                raise InvalidArgument("not a regular file") from None
        key = ""
        try:
            with self._commits.hold(attr.inode):
                key = self.meta.object_key(attr.inode)
                info = self.store.put_file(key, staged)
                key = self._follow_rename(attr.inode, key)
                size = os.path.getsize(staged)
                return self.meta.commit_upload(attr.inode, size, time.time_ns(), info.etag)
        except BaseException:
            if created:
                self._forget(parent, name, attr.inode, key)
            raise

    def _follow_rename(self, inode: InodeId, uploaded_to: str) -> str:
        """Where the object belongs now: a rename (by a mount) during the upload moves
        it; a file that lost its name meanwhile loses the object too (``NotFound``)."""
        try:
            key = self.meta.object_key(inode)
        except NotFound:
            self.store.delete(uploaded_to)
            raise
        if key != uploaded_to:
            self.store.rename(uploaded_to, key)
        return key

    def _forget(self, parent: InodeId, name: bytes, inode: InodeId, key: str) -> None:
        """Undo a create whose upload failed: nothing half-made stays visible."""
        with contextlib.suppress(FsError):
            if self.meta.lookup(parent, name).inode == inode:
                self.meta.unlink(parent, name)
        if key:
            with contextlib.suppress(FsError):
                self.store.delete(key)
