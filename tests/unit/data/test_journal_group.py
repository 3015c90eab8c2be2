"""WriteJournal's group commit: concurrent seals share fsyncs, and a crash between its
steps loses nothing that a seal acknowledged."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from cloudfs.data import journal as journal_mod
from cloudfs.data.journal import JournalEntry, WriteJournal
from cloudfs.errors import FsError


def staged(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def seal_concurrently(journal: WriteJournal, tmp_path: Path, n: int) -> list[JournalEntry]:
    sources = [staged(tmp_path, f"s{i}", f"file {i}".encode()) for i in range(n)]
    start = threading.Barrier(n)
    entries: list[JournalEntry] = []
    lock = threading.Lock()

    def seal(i: int) -> None:
        start.wait()
        entry = journal.seal(i + 1, f"k{i}", len(f"file {i}"), i, sources[i])
        with lock:
            entries.append(entry)

    threads = [threading.Thread(target=seal, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return entries


def test_concurrent_seals_share_one_fsync_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = WriteJournal(str(tmp_path / "wb"))
    syncs: list[str] = []
    real_fsync_path, real_fdatasync = journal_mod._fsync_path, os.fdatasync
    real_write_batch = journal._write_batch

    def fsync_path(path: str) -> None:
        syncs.append(os.path.basename(path))
        real_fsync_path(path)

    def fdatasync(fd: int) -> None:
        syncs.append("segment")
        real_fdatasync(fd)

    def slow_write_batch(entries: list[JournalEntry]) -> None:
        time.sleep(0.2)  # the first batch is slow: every other seal queues behind it
        real_write_batch(entries)

    monkeypatch.setattr(journal_mod, "_fsync_path", fsync_path)
    monkeypatch.setattr(journal_mod.os, "fdatasync", fdatasync)
    monkeypatch.setattr(journal, "_write_batch", slow_write_batch)
    entries = seal_concurrently(journal, tmp_path, 16)

    assert 1 <= journal.batches <= 3  # 16 seals, not 16 commits
    assert syncs.count("segment") == journal.batches
    assert syncs.count("data") == journal.batches  # the renames of a batch, at once
    assert syncs.count("log") == 1  # the new segment's name, once
    recovered = WriteJournal(str(tmp_path / "wb")).recover()
    assert recovered == sorted(entries, key=lambda e: e.seq)
    for e in recovered:
        assert Path(e.data_path).read_bytes() == f"file {e.inode - 1}".encode()


def test_a_failed_batch_fails_all_its_seals_and_keeps_earlier_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record torn by a failing write: its seal raises (nothing acknowledged), the
    caller keeps its file, the segment is not appended to again, and recovery keeps
    every acknowledged entry before and after."""
    journal = WriteJournal(str(tmp_path / "wb"))
    before = journal.seal(1, "a", 1, 1, staged(tmp_path, "a", b"a"))
    real_write = os.write

    def torn_write(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal_mod.os, "write", torn_write)
    source = staged(tmp_path, "b", b"b")
    with pytest.raises(FsError) as failed:
        journal.seal(2, "b", 1, 1, source)
    assert failed.value.errno == 28 and Path(source).read_bytes() == b"b"
    monkeypatch.setattr(journal_mod.os, "write", real_write)
    after = journal.seal(3, "c", 1, 1, staged(tmp_path, "c", b"c"))
    assert len(os.listdir(tmp_path / "wb" / "log")) == 2  # a new segment after the torn one
    assert WriteJournal(str(tmp_path / "wb")).recover() == [before, after]


def test_a_crash_between_the_steps_of_a_batch_loses_nothing_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Data renamed into data/ but its record never written (a crash after the fsync of
    the directory), or a record torn at the end of the segment: recovery drops those,
    which no seal had acknowledged, and keeps the rest."""
    wb = tmp_path / "wb"
    journal = WriteJournal(str(wb))
    acked = [journal.seal(i, f"k{i}", 1, 1, staged(tmp_path, f"s{i}", b"x")) for i in (1, 2)]
    (wb / "data" / "3").write_bytes(b"renamed, record never written")
    [segment] = os.listdir(wb / "log")
    with open(wb / "log" / segment, "ab") as f:
        f.write(journal_mod._encode(acked[0])[:-1].replace(b'"k1"', b'"k9"'))  # torn
    assert WriteJournal(str(wb)).recover() == acked
    assert sorted(os.listdir(wb / "data")) == ["1", "2"]


def test_uploaded_entries_leave_no_segments_behind(tmp_path: Path) -> None:
    journal = WriteJournal(str(tmp_path / "wb"))
    entries = seal_concurrently(journal, tmp_path, 4)
    journal.recover()  # a restart retires the segment: removing its last entry deletes it
    for e in entries:
        journal.remove(e)
    assert os.listdir(tmp_path / "wb" / "log") == []
    assert os.listdir(tmp_path / "wb" / "data") == []


CHILD = textwrap.dedent(
    """
    import sys, threading
    from cloudfs.data.journal import WriteJournal
    root = sys.argv[1]
    journal = WriteJournal(root + "/wb")
    lock = threading.Lock()
    def work(t):
        for i in range(100000):
            name = f"{root}/src/{t}-{i}"
            with open(name, "wb") as f:
                f.write(b"%d-%d" % (t, i))
            entry = journal.seal(t * 100000 + i, name, 1, 1, name)
            with lock:  # acknowledged: reported only after seal returned
                sys.stdout.write(f"{entry.seq} {t}-{i}\\n")
                sys.stdout.flush()
    for t in range(6):
        threading.Thread(target=work, args=(t,), daemon=True).start()
    threading.Event().wait()
    """
)


def test_kill_9_during_concurrent_seals_loses_nothing_acknowledged(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, env=env
    )
    assert child.stdout is not None
    acked: list[str] = []
    deadline = time.monotonic() + 30
    while len(acked) < 300 and time.monotonic() < deadline:
        acked.append(child.stdout.readline().decode())
    child.send_signal(signal.SIGKILL)
    child.wait()
    acked = [line for line in acked if line.endswith("\n")]
    assert len(acked) >= 300
    recovered = {e.seq: e for e in WriteJournal(str(tmp_path / "wb")).recover()}
    for line in acked:
        seq, content = line.split()
        assert Path(recovered[int(seq)].data_path).read_text() == content


def open_on(path: str) -> bool:
    """Whether this process has a descriptor open on ``path``."""
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}") == path:
                return True
    return False


def test_a_seal_through_the_descriptor_closes_it_also_when_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = WriteJournal(str(tmp_path / "wb"))
    source = staged(tmp_path, "s", b"")
    fd = os.open(source, os.O_WRONLY)
    os.write(fd, b"written, not yet synced")
    entry = journal.seal(1, "k", 23, 1, source, fd=fd)
    assert not open_on(entry.data_path) and not open_on(source)
    assert Path(entry.data_path).read_bytes() == b"written, not yet synced"

    def no_segment(entries: list[JournalEntry]) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(journal, "_write_batch", no_segment)
    source = staged(tmp_path, "s2", b"x")
    fd = os.open(source, os.O_WRONLY)
    with pytest.raises(FsError):
        journal.seal(2, "k2", 1, 1, source, fd=fd)
    assert not open_on(source) and Path(source).read_bytes() == b"x"
