"""WriteJournal: closed files waiting for upload, durable on local disk.

Write-back means close() returns before the UFS has the bytes, so the bytes
and the fact that they are owed to the UFS must survive a crash of the mount
(kill -9, OOM, a node reboot). The journal keeps both in a directory:

    <dir>/data/<seq>          the file's complete bytes (a staged copy moved here)
    <dir>/records/<seq>.json  inode, key at close, size, mtime, when sealed
    <dir>/uploads/<seq>.json  progress of its multipart upload, if any (resumable)

``seal`` makes an entry durable in this order: fsync the data, rename it into
``data/``, write the record to a temporary name, fsync it, rename it into
``records/``, fsync both directories. A crash at any point leaves either a
complete entry or no record (the half-sealed data is deleted by ``recover``);
close() returns only after ``seal`` did, so nothing acknowledged is lost.
``remove`` deletes the record first, then the data.

Sequence numbers grow across restarts (``recover`` continues after the
largest one seen); for one inode the entry with the largest ``seq`` is the
newest, and older ones are superseded. Every method does blocking file I/O:
call it from a worker thread. Errors are ``FsError`` with the OS errno
(ENOSPC for a full staging disk).
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from cloudfs.errors import FsError, NoSpace

log = logging.getLogger(__name__)

RECORD_VERSION = 1


@dataclass(frozen=True, slots=True)
class JournalEntry:
    seq: int
    inode: int
    key: str  # the file's UFS key when it was closed (the uploader asks the tree again)
    size: int
    mtime_ns: int
    sealed_at: float  # time.time() of the seal
    data_path: str


class WriteJournal:
    def __init__(self, directory: str) -> None:
        self._dir = directory
        self._data = os.path.join(directory, "data")
        self._records = os.path.join(directory, "records")
        self._uploads = os.path.join(directory, "uploads")
        self._lock = threading.Lock()
        self._next_seq = 1
        with _os_errors("journal"):
            for path in (directory, self._data, self._records, self._uploads):
                os.makedirs(path, mode=0o700, exist_ok=True)
            os.chmod(directory, 0o700)  # users' bytes: only the mount's owner reads them

    @property
    def directory(self) -> str:
        return self._dir

    def recover(self) -> list[JournalEntry]:
        """Every complete entry, oldest first; removes debris of interrupted seals."""
        entries: list[JournalEntry] = []
        with _os_errors("journal recovery"):
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
            recorded = {os.path.basename(e.data_path) for e in entries}
            for name in os.listdir(self._data):
                if name not in recorded:  # sealed data whose record never landed
                    os.unlink(os.path.join(self._data, name))
            for name in os.listdir(self._uploads):
                if name.split(".")[0] not in recorded:
                    os.unlink(os.path.join(self._uploads, name))
        entries.sort(key=lambda e: e.seq)
        with self._lock:
            self._next_seq = max([self._next_seq, *(e.seq + 1 for e in entries)])
        return entries

    def seal(self, inode: int, key: str, size: int, mtime_ns: int, source: str) -> JournalEntry:
        """Move the complete file ``source`` into the journal, durably; returns its entry."""
        with self._lock:
            seq = self._next_seq
            self._next_seq += 1
        data_path = os.path.join(self._data, str(seq))
        entry = JournalEntry(seq, inode, key, size, mtime_ns, time.time(), data_path)
        record = os.path.join(self._records, f"{seq}.json")
        with _os_errors("write-back journal"):
            _fsync_path(source)
            os.rename(source, data_path)
            try:
                tmp = record + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"version": RECORD_VERSION, **asdict(entry)}, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.rename(tmp, record)
                _fsync_path(self._data)
                _fsync_path(self._records)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.rename(data_path, source)  # the caller still owns its file
                with contextlib.suppress(OSError):
                    os.unlink(record + ".tmp")
                raise
        return entry

    def upload_state(self, entry: JournalEntry) -> str:
        """Where the store keeps the progress of ``entry``'s (multipart) upload."""
        return os.path.join(self._uploads, f"{entry.seq}.json")

    def remove(self, entry: JournalEntry) -> None:
        """Forget an uploaded (or superseded, or unlinked) entry. Idempotent."""
        with _os_errors("write-back journal"):
            for path in (
                os.path.join(self._records, f"{entry.seq}.json"),
                entry.data_path,
                self.upload_state(entry),
            ):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def _read_record(self, path: str) -> JournalEntry | None:
        try:
            with open(path) as f:
                raw = json.load(f)
            if raw.pop("version", None) != RECORD_VERSION:
                return None
            raw["data_path"] = os.path.join(self._data, str(raw["seq"]))  # the dir may move
            return JournalEntry(**raw)
        except (OSError, ValueError, TypeError, KeyError):
            return None


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
