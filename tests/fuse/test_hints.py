"""Announced read orders (cloudfs.hints, cloudfs hint) through real read-only S3 mounts.

A counting proxy between the mount and the S3 server tells which objects the
mount fetched and when (GETs of object bodies by key); the job's own figures
come from the mount's metrics (the ``cloudfs_job_*`` series, over its control
socket, as ``cloudfs stats --json`` reads them). Reads that must reach the
mount drop only their own file's pages from the kernel's cache
(``read_uncached``), not the whole machine's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cloudfs import hints
from cloudfs.hints import cached
from cloudfs.lib.jsonlines import MAX_LINE
from testkit.faults_proxy import FaultsProxy
from testkit.hints import (
    RawHints,
    job_finished,
    job_series,
    job_value,
    jobs,
    metrics,
    mount_pid,
    object_gets,
    write_files,
)
from testkit.mounts import Backing, Mount
from testkit.prometheus import wait_for
from testkit.users import ALICE, run_as
from tests.fuse.test_cloudfs_cache import proc_status, proxied, read_uncached

pytestmark = [pytest.mark.fuse, pytest.mark.parametrize("backing", ["s3"], indirect=True)]

REPO = Path(__file__).resolve().parents[2]
KiB = 1024
READ_FILES = "cloudfs_job_read_files_total"
READ_BYTES = "cloudfs_job_read_bytes_total"
HIT_BYTES = "cloudfs_job_hit_bytes_total"
PREFETCH_HIT_BYTES = "cloudfs_job_prefetch_hit_bytes_total"  # held thanks to the prefetch
STALL = "cloudfs_job_stall_seconds_total"
PREFETCHED = "cloudfs_job_prefetched_bytes_total"
EPOCH = "cloudfs_job_epoch"


@contextmanager
def read_only(backing: Backing, *options: str) -> Iterator[tuple[Mount, FaultsProxy, str]]:
    """A read-only mount of ``backing`` through a counting proxy; and the bucket."""
    assert backing.bucket is not None
    with proxied(backing, "--read-only", *options) as (m, proxy):
        yield m, proxy, backing.bucket


def held_bytes(scrape_job: dict[tuple[str, str], float], rank: str = "0") -> float:
    """Bytes the job read that a tier held (before the prefetch, or thanks to it)."""
    return scrape_job.get((HIT_BYTES, rank), 0.0) + scrape_job.get((PREFETCH_HIT_BYTES, rank), 0.0)


def settle(proxy: FaultsProxy, bucket: str, quiet: float = 0.5, timeout: float = 10.0) -> None:
    """Wait until no object GET came for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    seen = -1
    while (now := sum(object_gets(proxy, bucket).values())) != seen:
        assert time.monotonic() < deadline, "the mount kept fetching"
        seen = now
        time.sleep(quiet)


def wait_fetched(
    proxy: FaultsProxy, bucket: str, keys: set[str], what: str, timeout: float = 10.0
) -> None:
    wait_for(what, lambda: set(object_gets(proxy, bucket)) >= keys, timeout)


# -- prefetch along the order ------------------------------------------------------------


def test_an_announced_order_is_fetched_ahead_and_read_from_the_cache(backing: Backing) -> None:
    hinted = write_files(backing, "hinted", 200, (1 * KiB, 16 * KiB), seed=1)
    plain = write_files(backing, "plain", 50, (1 * KiB, 16 * KiB), seed=2)
    order = list(hinted)
    random.Random(3).shuffle(order)
    with read_only(backing) as (m, proxy, bucket):
        paths = [m.root / key for key in order]
        with hints.announce(paths, job="prefetch", epoch=1) as announcement:
            assert (announcement.accepted, announcement.skipped) == (200, 0)
            assert announcement.mounts == [str(m.root)]
            wait_for("every announced file held", lambda: all(cached(paths)), timeout=30)
            fetched = object_gets(proxy, bucket)
            assert set(fetched) == set(hinted) and max(fetched.values()) == 1

            proxy.reset_counts()
            for key, path in zip(order, paths, strict=True):
                assert path.read_bytes() == hinted[key]
            assert object_gets(proxy, bucket) == {}, "a read went to S3"

            job = job_series(metrics(m), "prefetch")
            total = sum(len(d) for d in hinted.values())
            assert job[(READ_FILES, "0")] == 200
            assert job[(READ_BYTES, "0")] == total
            assert held_bytes(job) == total
            assert job[(STALL, "0")] == 0
            assert job[(PREFETCHED, "0")] == total
            assert job[(EPOCH, "0")] == 1

        # The control: reads of files nobody announced cost a GET each.
        proxy.reset_counts()
        for key, data in plain.items():
            assert (m.root / key).read_bytes() == data
        assert object_gets(proxy, bucket) == dict.fromkeys(plain, 1)


def test_a_file_fetched_ahead_is_not_fetched_again_by_its_read(backing: Backing) -> None:
    files = write_files(backing, "twice", 200, (64 * KiB, 64 * KiB))
    order = list(files)
    options = ("--block-size", "64K", "--order-window-files", "4")
    with read_only(backing, *options) as (m, proxy, bucket):
        with hints.announce([m.root / key for key in order], job="close-behind"):
            for key in order:  # right behind the prefetch
                assert read_uncached(m.root / key) == files[key]
            settle(proxy, bucket, quiet=0.2)
            gets = object_gets(proxy, bucket)
        assert set(gets) == set(files)
        twice = sorted(key for key, n in gets.items() if n > 1)
        assert not twice, f"{len(twice)} of {len(files)} files fetched twice"


def test_the_window_bounds_what_is_fetched_ahead_and_follows_the_reads(backing: Backing) -> None:
    window = 10
    files = write_files(backing, "w", 70, (4 * KiB, 4 * KiB))
    order = sorted(files, reverse=True)  # not the listing's order
    with read_only(backing, "--order-window-files", str(window)) as (m, proxy, bucket):
        paths = [m.root / key for key in order]
        with hints.announce(paths, job="window") as announcement:
            assert announcement.accepted == 70
            settle(proxy, bucket, quiet=0.3)
            assert object_gets(proxy, bucket) == dict.fromkeys(order[:window], 1)
            for start in range(0, 50, window):
                ahead = set(order[: start + window])
                # After a pause, the window reaches `window` files past the last read...
                wait_fetched(proxy, bucket, ahead, what="the window to move")
                settle(proxy, bucket, quiet=0.1)
                assert set(object_gets(proxy, bucket)) == ahead
                # ... and its files are read without a GET of their own.
                for key in order[start : start + window]:
                    assert read_uncached(m.root / key) == files[key]
                gets = object_gets(proxy, bucket)
                assert all(gets[key] == 1 for key in order[: start + window]), gets
            wait_fetched(proxy, bucket, set(order[: 50 + window]), what="the last window")
            job = job_series(metrics(m), "window")
            assert job[(READ_FILES, "0")] == 50
            assert held_bytes(job) == job[(READ_BYTES, "0")] == 50 * 4 * KiB
            assert job[(STALL, "0")] == 0
        settle(proxy, bucket, quiet=0.2)
        assert set(object_gets(proxy, bucket)) == set(order[: 50 + window])


# -- when a job ends ---------------------------------------------------------------------

CHILD = """
import sys, time
from cloudfs import hints
with open(sys.argv[1]) as f:
    paths = f.read().splitlines()
announcement = hints.announce(paths, job=sys.argv[2])
print(announcement.accepted, flush=True)
time.sleep(600)
"""


def read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float = 30.0) -> list[str]:
    """The first ``count`` lines the child writes to its stdout (bounded wait)."""
    assert proc.stdout is not None
    fd, data = proc.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while data.count(b"\n") < count:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"the child wrote {data!r} in {timeout} s"
        chunk = os.read(fd, 65536)
        assert chunk, f"the child exited after writing {data!r}"
        data += chunk
    return data.decode().splitlines()[:count]


def test_a_held_job_ends_when_its_process_is_killed(backing: Backing, tmp_path: Path) -> None:
    files = write_files(backing, "k", 150, (1 * KiB, 1 * KiB))
    parallel = 2
    with read_only(backing, "--order-parallel", str(parallel)) as (m, proxy, bucket):
        proxy.delay = 0.05  # 2 GETs in flight, 50 ms each: the whole order takes ~4 s
        listing = tmp_path / "order.txt"
        listing.write_text("".join(f"{m.root / key}\n" for key in files))
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(listing), "doomed"],
            stdout=subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        try:
            assert read_lines(child, 1) == ["150"]
            wait_for("prefetch to start", lambda: len(object_gets(proxy, bucket)) >= 4, 10)
            assert ("doomed", "0") in jobs(metrics(m))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        wait_for("the job to end", lambda: job_finished(metrics(m), "doomed"), 5)
        stopped = sum(object_gets(proxy, bucket).values())
        time.sleep(1.0)
        after = sum(object_gets(proxy, bucket).values())
        assert after - stopped <= parallel, "the prefetch went on"
        assert after < 100, "the whole order was fetched before the kill"
        assert (m.root / "k/f00149").read_bytes() == files["k/f00149"]  # the mount is fine


def test_closing_an_announcement_ends_the_job(backing: Backing) -> None:
    write_files(backing, "c", 20, (1 * KiB, 2 * KiB))
    with read_only(backing) as (m, _proxy, _bucket):
        paths = sorted((m.root / "c").iterdir())
        announcement = hints.announce(paths, job="closer")
        assert job_series(metrics(m), "closer")
        announcement.close()
        wait_for("the job to end", lambda: job_finished(metrics(m), "closer"), 5)
        announcement.close()  # twice: harmless


def test_a_new_announcement_of_a_job_replaces_the_old(backing: Backing) -> None:
    write_files(backing, "r", 20, (1 * KiB, 2 * KiB))
    with read_only(backing) as (m, _proxy, _bucket):
        paths = sorted((m.root / "r").iterdir())
        first = hints.announce(paths, job="replaced", epoch=1)
        assert job_value(metrics(m), EPOCH, "replaced") == 1
        second = hints.announce(paths[::-1], job="replaced", epoch=2)
        try:
            scrape = metrics(m)
            assert job_value(scrape, EPOCH, "replaced") == 2
            assert {j for j in jobs(scrape) if j[0] == "replaced"} == {("replaced", "0")}
            # The old connection closing does not end its successor.
            first.close()
            time.sleep(0.5)
            assert job_value(metrics(m), EPOCH, "replaced") == 2
            # Another rank of the job is a job of its own.
            with hints.announce(paths, job="replaced", rank=1, epoch=2):
                assert {j for j in jobs(metrics(m)) if j[0] == "replaced"} == {
                    ("replaced", "0"),
                    ("replaced", "1"),
                }
        finally:
            second.close()
        wait_for("the job to end", lambda: job_finished(metrics(m), "replaced"), 5)


# -- bad input ---------------------------------------------------------------------------


def test_missing_and_outside_paths_are_skipped_and_counted(backing: Backing) -> None:
    files = write_files(backing, "s", 3, (1 * KiB, 2 * KiB))
    with read_only(backing) as (m, proxy, bucket):
        keys = list(files)
        paths: list[str | Path] = [
            m.root / keys[0],
            m.root / "s/missing",
            "/etc/hostname",  # on no CloudFS mount
            m.root / ".." / "elsewhere",
            m.root / "s",  # a directory
            m.root / "nowhere/f",
            m.root / keys[1],
        ]
        with hints.announce(paths, job="skipper") as announcement:
            assert announcement.accepted == 2
            assert announcement.skipped == 5
            assert announcement.reasons == {
                "outside any CloudFS mount": 2,
                "ENOENT": 2,
                "EISDIR": 1,
            }
            assert job_value(metrics(m), "cloudfs_job_order_files", "skipper") == 2
            settle(proxy, bucket)
            assert set(object_gets(proxy, bucket)) == {keys[0], keys[1]}
            assert cached(paths) == [True, False, False, False, False, False, True]
        for key, data in files.items():  # the mount keeps working
            assert (m.root / key).read_bytes() == data


def _announce_as_user(paths: list[str]) -> tuple[int, int, dict[str, int], list[bool]]:
    announcement = hints.announce(paths, job="alice")
    try:
        return (
            announcement.accepted,
            announcement.skipped,
            dict(announcement.reasons),
            cached(paths),
        )
    finally:
        announcement.close()


def test_files_the_caller_may_not_read_are_skipped_and_never_fetched(backing: Backing) -> None:
    write_files(backing, "secret", 10, (1 * KiB, 2 * KiB))
    with read_only(backing, "--file-mode", "0600") as (m, proxy, bucket):
        paths = sorted(str(p) for p in (m.root / "secret").iterdir())
        assert all((os.stat(p).st_mode & 0o777, os.stat(p).st_uid) == (0o600, 0) for p in paths)
        proxy.reset_counts()
        outcome = run_as(ALICE, _announce_as_user, paths, timeout=60)
        assert outcome.unwrap() == (0, 10, {"EACCES": 10}, [False] * 10)
        time.sleep(0.5)
        assert object_gets(proxy, bucket) == {}, "fetched for a user who may not read it"

        with hints.announce(paths, job="root"):  # root may read them: they are fetched
            wait_for("root's files held", lambda: all(cached(paths)), timeout=10)
        # ... and still show as not cached to a user who may not read them.
        seen = run_as(ALICE, cached, paths, timeout=60)
        assert seen.unwrap() == [False] * 10


def test_garbage_on_the_hints_socket_is_answered_with_an_errno(backing: Backing) -> None:
    files = write_files(backing, "g", 2, (1 * KiB, 1 * KiB))
    key = next(iter(files))
    with read_only(backing) as (m, _proxy, _bucket):
        cases: list[list[bytes | dict[str, object]]] = [
            [b"this is not json"],
            [b"[1, 2, 3]"],
            [b"\xff\xfe\x00"],
            [{"op": "no such operation"}],
            [{"op": "metrics"}],  # the control socket's operations are not served here
            [{"op": "announce"}],
            [{"op": "announce", "job": ""}],
            [{"op": "announce", "job": "x" * 500}],
            [{"op": "announce", "job": "two\nlines"}],
            [{"op": "announce", "job": 7}],
            [{"op": "announce", "job": "j", "rank": -1}],
            [{"op": "announce", "job": "j", "epoch": "3"}],
            [{"op": "announce", "job": "j", "rank": True}],
            [{"op": "announce", "job": "j"}, {"paths": key}],
            [{"op": "announce", "job": "j"}, {"paths": [key, 3]}],
            [{"op": "announce", "job": "j"}, {"files": [key]}],
            [{"op": "announce", "job": "j"}, b"not json either"],
            [{"op": "cached", "paths": "g"}],
            [{"op": "cached"}],
        ]
        for lines in cases:
            with RawHints(m) as raw:
                raw.send(*lines)
                answer = raw.final()
            assert answer.get("errno") == errno.EINVAL and answer.get("error"), (lines, answer)
        assert not jobs(metrics(m)), "a refused announcement left a job"

        # A first line longer than the protocol allows.
        with RawHints(m) as raw:
            # (The mount may give up on it before it was all sent.)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                raw.send(b"x" * (MAX_LINE + 1024))
            answer = raw.final()
            assert answer.get("errno") == errno.EINVAL, answer

        # The mount still answers, on both sockets.
        with RawHints(m) as raw:
            raw.send({"op": "cached", "paths": [key, "g/nope"]})
            assert raw.final() == {"done": True, "cached": [False, False]}
        assert (m.root / key).read_bytes() == files[key]
        assert cached([m.root / key]) == [True]
        with hints.announce([m.root / key], job="fine") as announcement:
            assert announcement.accepted == 1


@pytest.mark.parametrize("end", [[], [b""]], ids=["mid-order", "before-the-answer"])
def test_a_client_that_goes_away_before_the_answer_leaves_no_job(
    backing: Backing, end: list[bytes]
) -> None:
    files = write_files(backing, "a", 20, (1 * KiB, 1 * KiB))
    with read_only(backing) as (m, _proxy, _bucket):
        with RawHints(m) as raw:
            raw.send({"op": "announce", "job": "gone"}, {"paths": list(files)}, *end)
        time.sleep(1.0)
        scrape = metrics(m)  # no job, or one that ended (its series stay a while)
        live = job_series(scrape, "gone") and not job_finished(scrape, "gone")
        assert not live, "the job outlived its connection"


def test_cached_answers_every_time(backing: Backing) -> None:
    backing.write_object("c/f", b"x")
    with read_only(backing) as (m, _proxy, _bucket):
        for _ in range(300):
            assert hints.cached([m.root / "c/f"]) == [False]


# -- huge orders -------------------------------------------------------------------------

HUGE = 300_000
REAL = 20


@pytest.mark.slow
def test_a_huge_order_is_taken_in_bounded_memory_and_time(backing: Backing) -> None:
    files = write_files(backing, "h", REAL, (4 * KiB, 4 * KiB))
    keys = list(files)
    with read_only(backing) as (m, _proxy, _bucket):
        pid = mount_pid(m)
        assert (m.root / keys[0]).read_bytes() == files[keys[0]]  # listed, warm
        before = proc_status(pid, "VmRSS")

        def order() -> Iterator[str]:
            for i in range(HUGE // 2):
                yield str(m.root / keys[i % REAL])  # a few real files, again and again
                yield str(m.root / f"h/nope{i:06d}")  # and names that do not exist

        started = time.monotonic()
        with hints.announce(order(), job="huge") as announcement:
            took = time.monotonic() - started
            assert announcement.accepted == HUGE // 2
            assert announcement.reasons == {"ENOENT": HUGE // 2}
            assert job_value(metrics(m), "cloudfs_job_order_files", "huge") == HUGE // 2
            peak = proc_status(pid, "VmHWM")
            grew = peak - before
        print(f"\n{HUGE} paths announced in {took:.1f} s; the mount's RSS grew {grew >> 20} MiB")
        assert took < 60
        # The order itself is ~25 bytes a file; the block keys of the first files ranked
        # and a 5000-path line being parsed add a few tens of MiB (37 MiB measured).
        assert grew < 100 << 20, f"the mount's resident memory grew {grew >> 20} MiB"
        assert (m.root / keys[-1]).read_bytes() == files[keys[-1]]


# -- cloudfs hint ------------------------------------------------------------------------


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
    )  # fmt: skip


def test_cloudfs_hint_announces_a_file_list(backing: Backing, tmp_path: Path) -> None:
    files = write_files(backing, "cli", 10, (1 * KiB, 2 * KiB))
    with read_only(backing) as (m, _proxy, _bucket):
        listing = tmp_path / "order.txt"
        keys = list(files)
        # Relative to the mountpoint, absolute, a blank line, a missing file.
        listing.write_text(
            "\n".join([*keys[:5], *(str(m.root / k) for k in keys[5:]), "", "cli/gone"]) + "\n"
        )
        done = cli("hint", str(m.root), "--file-list", str(listing), "--job", "clijob")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"announced 10 files to {m.root} ("), done.stdout
        assert done.stderr.strip() == "skipped 1: 1 ENOENT"
        # Detached: the job outlives the command.
        assert job_value(metrics(m), "cloudfs_job_order_files", "clijob") == 10
        wait_for("the files held", lambda: all(cached([m.root / k for k in keys])), 10)


def test_cloudfs_hint_refuses_what_it_cannot_announce(backing: Backing, tmp_path: Path) -> None:
    write_files(backing, "cli", 1, (1 * KiB, 1 * KiB))
    with read_only(backing) as (m, _proxy, _bucket):
        listing = tmp_path / "order.txt"
        listing.write_text("cli/f00000\n")
        for args, what in [
            ((str(m.root), "--file-list", str(tmp_path / "nope.txt")), "nope.txt"),
            ((str(tmp_path), "--file-list", str(listing)), "not on a CloudFS mount"),
            ((str(m.root), "--file-list", str(listing), "--epoch", "-1"), "--epoch"),
        ]:
            done = cli("hint", *args)
            assert done.returncode == 2, (args, done)
            assert len(done.stderr.splitlines()) == 1 and what in done.stderr, done.stderr
            assert "Traceback" not in done.stderr and done.stdout == ""


def test_cloudfs_hint_hold_keeps_the_job_while_it_runs(backing: Backing, tmp_path: Path) -> None:
    files = write_files(backing, "hold", 5, (1 * KiB, 1 * KiB))
    with read_only(backing) as (m, _proxy, _bucket):
        listing = tmp_path / "order.txt"
        listing.write_text("".join(f"{k}\n" for k in files))
        holder = subprocess.Popen(
            [sys.executable, "-m", "cloudfs.cli.main", "hint", str(m.root),
             "--file-list", str(listing), "--job", "holder", "--hold"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
        )  # fmt: skip
        try:
            announced, holding = read_lines(holder, 2)
            assert announced.startswith("announced 5 files") and holding.startswith("holding")
            assert job_value(metrics(m), "cloudfs_job_order_files", "holder") == 5
            holder.send_signal(signal.SIGTERM)
            _, stderr = holder.communicate(timeout=10)
            assert holder.returncode == 0 and b"Traceback" not in stderr, stderr
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait()
        wait_for("the job to end", lambda: job_finished(metrics(m), "holder"), 5)


# -- eviction by the announced order -----------------------------------------------------

EPOCH_FILES = 60
BLOCK = 64 * KiB


def _epochs(backing: Backing, announce: bool, *options: str) -> list[int]:
    """Three epochs over 60 one-block files with a disk tier for 30, each a new shuffle;
    the object GETs each epoch cost (prefetch included)."""
    files = {f"ep/f{i:02d}": random.Random(i).randbytes(BLOCK) for i in range(EPOCH_FILES)}
    if not backing.keys():
        for key, data in files.items():
            backing.write_object(key, data)
    capacity = EPOCH_FILES // 2 * (BLOCK + 16)  # 30 blocks and their headers
    rng = random.Random(11)
    costs = []
    with read_only(
        backing, "--block-size", "64K", "--cache-size", str(capacity),
        "--memory-cache-size", "128K", "--free-space-ratio", "0", *options,
    ) as (m, proxy, bucket):  # fmt: skip
        previous: hints.Announcement | None = None
        for epoch in range(3):
            order = list(files)
            rng.shuffle(order)
            proxy.reset_counts()
            if announce:
                current = hints.announce([m.root / k for k in order], job="evict", epoch=epoch)
                if previous is not None:
                    previous.close()
                previous = current
            for key in order:
                assert read_uncached(m.root / key) == files[key]
            settle(proxy, bucket, quiet=0.3)
            if announce:
                # Every file reached the mount (counted since the job's first epoch).
                read = job_value(metrics(m), READ_FILES, "evict")
                assert read == EPOCH_FILES * (epoch + 1), read
            costs.append(sum(object_gets(proxy, bucket).values()))
        if previous is not None:
            previous.close()
    return costs


@pytest.mark.slow
def test_an_announced_order_keeps_what_fits_where_lru_thrashes(backing: Backing) -> None:
    belady = _epochs(backing, True, "--order-window-files", "4")
    lru = _epochs(backing, False, "--cache-policy", "lru")
    print(f"\nobject GETs per epoch: announced {belady}, LRU {lru} (of {EPOCH_FILES} files)")
    assert lru[0] == EPOCH_FILES
    # A few files may be fetched twice: see test_a_file_fetched_ahead_is_not_fetched_again.
    assert EPOCH_FILES <= belady[0] <= EPOCH_FILES + 6
    for epoch in (1, 2):
        assert belady[epoch] <= 0.6 * EPOCH_FILES, belady
        assert lru[epoch] >= 0.75 * EPOCH_FILES, lru
        assert lru[epoch] - belady[epoch] >= 0.2 * EPOCH_FILES, (belady, lru)
