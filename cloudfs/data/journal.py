"""WriteJournal: closed files waiting for upload, durable on local disk.

Write-back means close() returns before the UFS has the bytes, so the bytes
and the fact that they are owed to the UFS must survive a crash of the mount
(kill -9, OOM, a node reboot, a power loss). The journal keeps both in a
directory:

    <dir>/data/<seq>            the file's complete bytes (a staged copy moved here)
    <dir>/log/<first seq>.log   records (inode, key at close, size, mtime, when
                                sealed), one line each: "<crc32> <json>"
    <dir>/uploads/<seq>.json    progress of its multipart upload, if any (resumable)
    <dir>/records/<seq>.json    a record of an older version (one file each): still read

**Group commit.** Closes run concurrently (one worker thread each) and each
``seal`` would otherwise pay for its own fsyncs of the record and of both
directories. Here every seal does its own part first: fsync its data (through
the descriptor the caller hands over, ``fd``, if any) and rename it into
``data/``. Then it queues its record and waits. One of the waiting threads
(the first to find no commit running) takes every queued record and commits
them as one batch: fsync
``data/`` once (every rename of the batch happened before it was queued), write
the batch's records to the log segment with one ``write``, fdatasync the
segment once (and fsync ``log/`` when the segment is new), then wakes the
batch's threads. Records that arrive while a batch is committed form the next
batch, so N concurrent closes cost N data fsyncs plus one fsync each of the
directory and the log, instead of 4N.

**Nothing acknowledged is lost.** ``seal`` returns (and close() is answered)
only after its batch's fdatasync returned. At that point (a) the data was
fsync'd before its rename, (b) the rename was made durable by the fsync of
``data/`` before the record was written, and (c) the record is durable. A crash
(kill -9 or power loss) at any earlier step leaves at most: data in ``data/``
with no record (deleted by ``recover``), a record torn at the end of a segment
(its checksum fails: ``recover`` ignores it and everything after it in that
segment, which no seal had acknowledged), or a source file still in the staging
area (the staging area is emptied by the next mount). A failed batch raises in
every seal of it: their sources are moved back for the caller, and the segment
is abandoned (later batches start a new one), so a half-written record is never
followed by acknowledged ones.

**Removal** (``remove``, after the upload) unlinks the data, then forgets the
record in memory; a segment is deleted once none of its records is live. None
of this needs an fsync: a record whose data is gone is dropped by ``recover``.

Sequence numbers grow across restarts (``recover`` continues after the largest
one seen, and starts a new segment); for one inode the entry with the largest
``seq`` is the newest, and older ones are superseded. Every method does
blocking file I/O: call it from a worker thread (it is thread-safe). Errors are
``FsError`` with the OS errno (ENOSPC for a full staging disk).
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

from cloudfs.errors import FsError, NoSpace

log = logging.getLogger(__name__)

RECORD_VERSION = 1
SEGMENT_RECORDS = 4096  # records per log segment before a new one is started


@dataclass(frozen=True, slots=True)
class JournalEntry:
    seq: int
    inode: int
    key: str  # the file's UFS key when it was closed (the uploader asks the tree again)
    size: int
    mtime_ns: int
    sealed_at: float  # time.time() of the seal
    data_path: str


@dataclass(slots=True)
class _Ticket:
    """One seal waiting for its batch."""

    entry: JournalEntry
    done: bool = False
    error: OSError | None = None


@dataclass(slots=True)
class _Segment:
    path: str
    live: set[int] = field(default_factory=set)  # seqs of records not removed
    written: int = 0  # records written (the active segment rotates at SEGMENT_RECORDS)
    fd: int = -1  # open for appending while active


class WriteJournal:
    def __init__(self, directory: str) -> None:
        self._dir = directory
        self._data = os.path.join(directory, "data")
        self._log = os.path.join(directory, "log")
        self._records = os.path.join(directory, "records")
        self._uploads = os.path.join(directory, "uploads")
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._next_seq = 1
        self._queue: list[_Ticket] = []
        self._committing = False
        self._active: _Segment | None = None
        self._segment_of: dict[int, _Segment] = {}  # seq -> the segment of its record
        self._legacy: set[int] = set()  # seqs whose record is a file in records/
        self.batches = 0  # group commits done (tests and benchmarks read it)
        with _os_errors("journal"):
            for path in (directory, self._data, self._log, self._records, self._uploads):
                os.makedirs(path, mode=0o700, exist_ok=True)
            os.chmod(directory, 0o700)  # users' bytes: only the mount's owner reads them

    @property
    def directory(self) -> str:
        return self._dir

    def recover(self) -> list[JournalEntry]:
        """Every complete entry, oldest first; removes debris of interrupted seals."""
        entries: list[JournalEntry] = []
        with _os_errors("journal recovery"), self._lock:
            self._close_active()
            entries += self._recover_legacy()
            for name in sorted(os.listdir(self._log)):
                segment = _Segment(os.path.join(self._log, name))
                for entry in self._read_segment(segment.path):
                    if os.path.exists(entry.data_path):
                        entries.append(entry)
                        segment.live.add(entry.seq)
                        self._segment_of[entry.seq] = segment
                if not segment.live:  # everything in it was uploaded (or torn)
                    os.unlink(segment.path)
            recorded = {os.path.basename(e.data_path) for e in entries}
            for name in os.listdir(self._data):
                if name not in recorded:  # sealed data whose record never landed
                    os.unlink(os.path.join(self._data, name))
            for name in os.listdir(self._uploads):
                if name.split(".")[0] not in recorded:
                    os.unlink(os.path.join(self._uploads, name))
            entries.sort(key=lambda e: e.seq)
            self._next_seq = max([self._next_seq, *(e.seq + 1 for e in entries)])
        return entries

    def seal(
        self, inode: int, key: str, size: int, mtime_ns: int, source: str, *, fd: int = -1
    ) -> JournalEntry:
        """Move the complete file ``source`` into the journal, durably; returns its entry.

        ``fd``: ``source`` open for writing (the staged copy's descriptor): fsync'd
        through it, then closed, also when the seal fails.
        """
        with self._lock:
            seq = self._next_seq
            self._next_seq += 1
        data_path = os.path.join(self._data, str(seq))
        entry = JournalEntry(seq, inode, key, size, mtime_ns, time.time(), data_path)
        with _os_errors("write-back journal"):
            if fd >= 0:
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            else:
                _fsync_path(source)
            os.rename(source, data_path)
            try:
                self._commit(entry)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.rename(data_path, source)  # the caller still owns its file
                raise
        return entry

    def upload_state(self, entry: JournalEntry) -> str:
        """Where the store keeps the progress of ``entry``'s (multipart) upload."""
        return os.path.join(self._uploads, f"{entry.seq}.json")

    def remove(self, entry: JournalEntry) -> None:
        """Forget an uploaded (or superseded, or unlinked) entry. Idempotent."""
        with _os_errors("write-back journal"):
            with self._lock:
                legacy = entry.seq in self._legacy
                self._legacy.discard(entry.seq)
            if legacy:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self._records, f"{entry.seq}.json"))
            for path in (entry.data_path, self.upload_state(entry)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            with self._lock:
                segment = self._segment_of.pop(entry.seq, None)
                if segment is None:
                    return
                segment.live.discard(entry.seq)
                if segment.live or segment is self._active:
                    return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(segment.path)

    # -- group commit -----------------------------------------------------------

    def _commit(self, entry: JournalEntry) -> None:
        """Make ``entry``'s record durable together with those of concurrent seals."""
        ticket = _Ticket(entry)
        with self._cond:
            self._queue.append(ticket)
            while not ticket.done:
                if self._committing:
                    self._cond.wait()
                    continue
                batch, self._queue = self._queue, []
                self._committing = True
                error: OSError | None = OSError(errno_mod.EIO, "journal commit interrupted")
                self._cond.release()
                try:
                    self._write_batch([t.entry for t in batch])
                    error = None
                except OSError as exc:
                    error = exc
                finally:
                    self._cond.acquire()
                    self._committing = False
                    for t in batch:
                        t.done, t.error = True, error
                    self._cond.notify_all()
        failed = ticket.error
        if failed is not None:  # a new exception in each thread of the batch
            raise OSError(failed.errno or errno_mod.EIO, failed.strerror or str(failed)) from failed

    def _write_batch(self, entries: list[JournalEntry]) -> None:
        """Called by one thread at a time (``_committing``), without the lock."""
        _fsync_path(self._data)  # the batch's renames into data/, before its records
        segment = self._active
        if segment is None or segment.written >= SEGMENT_RECORDS:
            segment = self._open_segment(entries[0].seq)
        lines = b"".join(_encode(e) for e in entries)
        try:
            written = 0
            while written < len(lines):
                written += os.write(segment.fd, lines[written:])
            os.fdatasync(segment.fd)
        except OSError:
            with self._lock:  # maybe torn: no acknowledged record may follow it
                self._retire(segment)
            raise
        with self._lock:
            segment.written += len(entries)
            for e in entries:
                segment.live.add(e.seq)
                self._segment_of[e.seq] = segment
            self.batches += 1

    def _open_segment(self, first_seq: int) -> _Segment:
        with self._lock:
            if self._active is not None:
                self._retire(self._active)
        path = os.path.join(self._log, f"{first_seq:012d}.log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        segment = _Segment(path, fd=fd)
        try:
            _fsync_path(self._log)  # the new segment's name is durable before its records
        except BaseException:
            os.close(fd)
            raise
        with self._lock:
            self._active = segment
        return segment

    def _retire(self, segment: _Segment) -> None:
        """Stop appending to ``segment`` (lock held); delete it if nothing in it is live."""
        if segment.fd >= 0:
            os.close(segment.fd)
            segment.fd = -1
        if self._active is segment:
            self._active = None
        if not segment.live:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(segment.path)

    def _close_active(self) -> None:
        if self._active is not None:
            self._retire(self._active)

    # -- reading records -------------------------------------------------------------

    def _read_segment(self, path: str) -> Iterator[JournalEntry]:
        with open(path, "rb") as f:
            for line in f:
                entry = self._decode(line)
                if entry is None:
                    log.warning("write-back journal: %s ends in a torn record", path)
                    return  # a torn tail: nothing after it was acknowledged
                yield entry

    def _decode(self, line: bytes) -> JournalEntry | None:
        crc, _, body = line.rstrip(b"\n").partition(b" ")
        try:
            if not line.endswith(b"\n") or int(crc, 16) != zlib.crc32(body):
                return None
            return self._entry(json.loads(body))
        except (ValueError, TypeError, KeyError):
            return None

    def _entry(self, raw: dict[str, object]) -> JournalEntry | None:
        if raw.pop("version", None) != RECORD_VERSION:
            return None
        raw["data_path"] = os.path.join(self._data, str(raw["seq"]))  # the dir may move
        return JournalEntry(**raw)  # type: ignore[arg-type]

    def _recover_legacy(self) -> list[JournalEntry]:
        """Records of the one-file-per-record format (lock held)."""
        entries = []
        for name in os.listdir(self._records):
            path = os.path.join(self._records, name)
            if not name.endswith(".json"):  # a record that was being written
                os.unlink(path)
                continue
            entry = self._read_record(path)
            if entry is None or not os.path.exists(entry.data_path):
                log.error("write-back journal: dropping unreadable record %s", path)
                os.unlink(path)
                continue
            entries.append(entry)
            self._legacy.add(entry.seq)
        return entries

    def _read_record(self, path: str) -> JournalEntry | None:
        try:
            with open(path) as f:
                return self._entry(json.load(f))
        except (OSError, ValueError, TypeError, KeyError):
            return None


def _encode(entry: JournalEntry) -> bytes:
    raw = asdict(entry)
    del raw["data_path"]  # derived from seq and the journal's directory
    body = json.dumps({"version": RECORD_VERSION, **raw}, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _os_errors(what: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        code = exc.errno or errno_mod.EIO
        cls = NoSpace if code in (errno_mod.ENOSPC, errno_mod.EDQUOT) else FsError
        raise cls(f"{what}: {exc}", errno=code) from exc
