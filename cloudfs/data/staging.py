"""StagedFile: the local staging copy of one file being written.

Copy-on-write over an existing UFS object (the *base*): the staging file starts
as a sparse file of the base's size, and base blocks are copied in only when
needed -- when a write touches part of a block (the rest of the block must
keep the base's bytes), on ``materialize()`` before an upload, or before the
base object is deleted. Reads of blocks not copied yet go to the base through
the ``ObjectReader`` (and so through the block cache).

What is local vs from the base, per block ``i`` of ``block_size``:

* ``i`` in ``present``: the local file is authoritative for the whole block.
* otherwise, bytes below ``base_limit`` come from the base, bytes above it
  from the local file. ``base_limit`` starts at the base size and only ever
  shrinks (truncate down), so after truncating down and growing again the gap
  reads as zeros (the local file's hole), never as old base bytes.

A write covering a block's whole base part marks it present without fetching.
Mutations (pwrite, truncate, materialize, upload) are serialized by a trio
lock so a base fill cannot overwrite a concurrent write. Reads take no lock;
a read racing a write sees the block before or after it. ``close()`` must not
race other calls on the same object (the VFS closes the last handle last).

``truncate=True`` (O_TRUNC) starts empty and ignores the base; ``new=True``
(O_CREAT of a new file) has no base and is dirty from the start. Local I/O
errors surface as ``FsError`` with the OS errno (ENOSPC for a full staging disk).
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import functools
import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import trio  # trio 0.22 ships no py.typed

from cloudfs.data.blocks import ObjectRef, block_count, blocks_for_range, consecutive_runs
from cloudfs.data.prefetch import ReadCursor
from cloudfs.data.reader import ObjectReader
from cloudfs.data.space import StagingSpace
from cloudfs.errors import FsError, InvalidArgument, NoSpace, RemoteIOError
from cloudfs.types import ObjectInfo
from cloudfs.ufs.interface import ObjectStore

T = TypeVar("T")

# Bytes copied from the base per request while materializing: bounds memory
# while keeping ranged GETs large (BASELINE.md: few large requests).
_MATERIALIZE_CHUNK_BYTES = 64 * 1024 * 1024


class StagedFile:
    def __init__(
        self,
        path: str,
        fd: int,
        base: ObjectRef | None,
        reader: ObjectReader,
        limiter: trio.CapacityLimiter,
        *,
        dirty: bool,
        space: StagingSpace | None = None,
    ) -> None:
        """Use ``StagedFile.open``; this only wires an already opened file."""
        self._space = space or StagingSpace()
        self._charged = 0  # bytes charged to the staging area's bound
        self._path = path
        self._fd = fd
        self._base = base
        self._reader = reader
        self._limiter = limiter
        self._bs = reader.block_size
        self._size = base.size if base is not None else 0
        self._base_limit = self._size
        self._present: set[int] = set()
        self._lock = trio.Lock()
        self._cursor = ReadCursor()
        self._closed = False
        self.dirty = dirty

    @classmethod
    async def open(
        cls,
        staging_dir: str,
        name: str,
        base: ObjectRef | None,
        reader: ObjectReader,
        limiter: trio.CapacityLimiter,
        truncate: bool = False,
        *,
        new: bool = False,
        copy_of: str | None = None,
        space: StagingSpace | None = None,
        first_write: tuple[int, bytes] | None = None,
    ) -> StagedFile:
        """Create (replacing any leftover) ``staging_dir/name`` over ``base``.

        ``copy_of``: start as a local copy of that file (bytes closed earlier
        and still waiting in the write-back journal) instead of over ``base``;
        ``FileNotFoundError`` if it is gone (uploaded meanwhile). ``space``
        bounds the staging area (``NoSpace`` when it stays full).
        ``first_write``: (offset, data) of a ``new`` file's first write, written in
        the same thread hop as the create (a new small file is written once).
        """
        if not name or "/" in name or name in (".", ".."):
            raise InvalidArgument(f"bad staging file name {name!r}")
        if first_write is not None and not new:
            raise InvalidArgument("a first write is for a new file only")
        if truncate or new or copy_of is not None:
            base = None
        path = os.path.join(staging_dir, name)
        size = base.size if base is not None else 0
        space = space or StagingSpace()
        written = 0
        if first_write is not None:
            if first_write[0] < 0:
                raise InvalidArgument(f"negative offset {first_write[0]}")
            written = first_write[0] + len(first_write[1])
            await space.reserve(written, path)

        def create() -> int:
            os.makedirs(staging_dir, exist_ok=True)
            if copy_of is not None and not truncate:
                shutil.copyfile(copy_of, path)
                return os.open(path, os.O_RDWR | os.O_CLOEXEC)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.ftruncate(fd, size)
                if first_write is not None:
                    _pwrite_all(fd, first_write[1], first_write[0])
            except BaseException:
                os.close(fd)
                raise
            return fd

        try:
            fd = await trio.to_thread.run_sync(create, limiter=limiter)
        except BaseException as exc:
            space.release(written)  # the first write's charge: nothing was made
            if isinstance(exc, FileNotFoundError) and copy_of is not None:
                raise  # the journal's copy went away: uploaded meanwhile
            if isinstance(exc, OSError):
                raise _fs_error(exc) from exc
            raise
        staged = cls(path, fd, base, reader, limiter, dirty=truncate or new, space=space)
        if first_write is not None:
            staged._charged = staged._size = written
        try:
            if copy_of is not None and not truncate:
                staged._size = await _run_os(lambda: os.fstat(fd).st_size, limiter)
            await staged._charge(staged._size)
        except BaseException:
            await staged.close()
            raise
        return staged

    # -- state ----------------------------------------------------------------

    @property
    def size(self) -> int:
        return self._size

    @property
    def path(self) -> str:
        return self._path

    @property
    def base(self) -> ObjectRef | None:
        """The object still backing unfetched blocks; ``None`` once fully local."""
        return self._base

    @property
    def closed(self) -> bool:
        return self._closed

    def rebase(self, ref: ObjectRef) -> None:
        """The base object moved (a rename of the file or a directory above it).

        Same bytes under a new key (and, after a multipart copy, a new ETag):
        unfetched blocks come from there from now on. The base size is kept,
        it is what ``base_limit`` was measured against.
        """
        if self._base is not None:
            self._base = replace(self._base, key=ref.key, etag=ref.etag)

    # -- I/O ------------------------------------------------------------------

    async def pread(self, offset: int, size: int) -> bytes | memoryview:
        """Bytes ``[offset, min(offset + size, self.size))``."""
        self._check_open()
        if offset < 0 or size < 0:
            raise InvalidArgument(f"bad range offset={offset} size={size}")
        end = min(offset + size, self._size)
        if end <= offset:
            return b""
        base = self._base
        parts: list[bytes | memoryview] = []
        for from_base, lo, hi in self._plan(offset, end):
            if from_base and base is not None:
                data = await self._reader.read(base, lo, hi - lo, self._cursor)
                if len(data) != hi - lo:
                    raise RemoteIOError(f"{base.key}: base object is shorter than expected")
            else:
                data = await _run_os(
                    functools.partial(os.pread, self._fd, hi - lo, lo), self._limiter
                )
                data += bytes(hi - lo - len(data))  # short only when racing a truncate
            parts.append(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def pwrite(self, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset`` (past the end leaves a hole of zeros)."""
        self._check_open()
        if offset < 0:
            raise InvalidArgument(f"negative offset {offset}")
        if not data:
            return 0
        end = offset + len(data)
        async with self._lock:
            await self._charge(end)
            covered: list[int] = []
            for index in blocks_for_range(offset, end, self._bs):
                if not self._needs_base(index):
                    continue
                start = index * self._bs
                if offset <= start and end >= min(start + self._bs, self._base_limit):
                    covered.append(index)  # the write replaces every base byte
                else:
                    await self._fill(index)
            await _run_os(lambda: _pwrite_all(self._fd, data, offset), self._limiter)
            self._present.update(covered)
            self._size = max(self._size, end)
            self.dirty = True
        return len(data)

    async def truncate(self, size: int) -> None:
        """Set the size; bytes past a shrink read as zeros if the file grows again."""
        self._check_open()
        if size < 0:
            raise InvalidArgument(f"negative size {size}")
        async with self._lock:
            await self._charge(size)
            await _run_os(lambda: os.ftruncate(self._fd, size), self._limiter)
            self._uncharge_above(size)
            self._base_limit = min(self._base_limit, size)
            if size != self._size:
                self.dirty = True
            self._size = size

    async def materialize(self) -> None:
        """Copy every base block not present yet, so the local file is complete."""
        self._check_open()
        async with self._lock:
            await self._materialize_locked()

    async def upload(self, store: ObjectStore, key: str) -> ObjectInfo:
        """Materialize and upload the whole file as ``key``; clears ``dirty``.

        No fsync of the staged copy: the store reads it back at once through
        the page cache, and the store's put is what makes the bytes durable.
        """
        self._check_open()
        async with self._lock:
            await self._materialize_locked()
            info: ObjectInfo = await trio.to_thread.run_sync(
                store.put_file, key, self._path, limiter=self._limiter
            )
            self.dirty = False
            return info

    async def detach(self) -> tuple[str, int]:
        """Make the local file complete and hand it over, still open.

        Returns its path and descriptor; the caller owns both from then on (the
        write-back journal fsyncs and closes the descriptor and moves the file, in
        one thread hop). The object is closed afterwards.
        """
        self._check_open()
        async with self._lock:
            await self._materialize_locked()
            self._closed = True
            self._uncharge_above(0)  # from now on the journal holds (and counts) it
            return self._path, self._fd

    async def close(self) -> None:
        """Close and delete the staging file. Idempotent."""
        if self._closed:
            return
        async with self._lock:
            self._closed = True
            self._uncharge_above(0)
            fd, path = self._fd, self._path

            def remove() -> None:
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

            with trio.CancelScope(shield=True):
                await _run_os(remove, self._limiter)

    # -- internals ------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise FsError("staged file is closed", errno=errno_mod.EBADF)

    async def _charge(self, size: int) -> None:
        """Charge the staging area up to a logical size of ``size`` (may wait, or NoSpace)."""
        if size > self._charged:
            await self._space.reserve(size - self._charged, self._path)
            self._charged = size

    def _uncharge_above(self, size: int) -> None:
        if self._charged > size:
            self._space.release(self._charged - size)
            self._charged = size

    def _needs_base(self, index: int) -> bool:
        return (
            self._base is not None
            and index * self._bs < self._base_limit
            and index not in self._present
        )

    def _plan(self, offset: int, end: int) -> list[tuple[bool, int, int]]:
        """Split ``[offset, end)`` into merged (from_base, lo, hi) segments."""
        segments: list[tuple[bool, int, int]] = []

        def add(from_base: bool, lo: int, hi: int) -> None:
            if hi <= lo:
                return
            if segments and segments[-1][0] == from_base and segments[-1][2] == lo:
                segments[-1] = (from_base, segments[-1][1], hi)
            else:
                segments.append((from_base, lo, hi))

        for index in blocks_for_range(offset, end, self._bs):
            lo = max(offset, index * self._bs)
            hi = min(end, (index + 1) * self._bs)
            if self._needs_base(index):
                split = min(hi, max(lo, self._base_limit))
                add(True, lo, split)
                add(False, split, hi)
            else:
                add(False, lo, hi)
        return segments

    async def _fill(self, index: int) -> None:
        """Copy the base part of block ``index`` into the local file (lock held)."""
        await self._copy_from_base([index])

    async def _materialize_locked(self) -> None:
        if self._base is None:
            return
        chunk = max(1, _MATERIALIZE_CHUNK_BYTES // self._bs)
        missing = [
            i for i in range(block_count(self._base_limit, self._bs)) if i not in self._present
        ]
        for run in consecutive_runs(missing, max_len=chunk):
            await self._copy_from_base(run)
        self._base = None  # fully local: the base object may now change or vanish
        self._present.clear()
        self._base_limit = 0

    async def _copy_from_base(self, run: list[int]) -> None:
        base = self._base
        assert base is not None
        start = run[0] * self._bs
        stop = min((run[-1] + 1) * self._bs, self._base_limit)
        data = await self._reader.read(base, start, stop - start)
        if len(data) != stop - start:
            raise RemoteIOError(f"{base.key}: base object is shorter than expected")
        await _run_os(lambda: _pwrite_all(self._fd, data, start), self._limiter)
        self._present.update(run)


async def _run_os(fn: Callable[[], T], limiter: trio.CapacityLimiter) -> T:
    """Run blocking local I/O in a thread; OSError becomes an errno-carrying FsError."""
    try:
        result: T = await trio.to_thread.run_sync(fn, limiter=limiter)
    except OSError as exc:
        raise _fs_error(exc) from exc
    return result


def _fs_error(exc: OSError) -> FsError:
    code = exc.errno or errno_mod.EIO
    cls = NoSpace if code in (errno_mod.ENOSPC, errno_mod.EDQUOT) else FsError
    return cls(f"staging: {exc}", errno=code)


def _pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written
