"""NamespaceLock: reentrant in a process, the shared mutex taken once per outermost holder."""

from __future__ import annotations

import threading
import time

import pytest

from cloudfs.errors import RemoteIOError
from cloudfs.meta.engine import ns_lock
from cloudfs.meta.engine.ns_lock import NamespaceLock


class CountingMutex:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def acquire(self) -> None:
        if self.fail:
            raise RemoteIOError("held elsewhere")
        self.calls.append("acquire")

    def release(self) -> None:
        self.calls.append("release")

    def lend(self) -> None:
        self.calls.append("lend")

    def resume(self) -> None:
        self.calls.append("resume")


def test_nested_holds_take_the_shared_mutex_once() -> None:
    mutex = CountingMutex()
    lock = NamespaceLock(mutex)
    with lock, lock, lock:
        assert mutex.calls == ["acquire"]
    assert mutex.calls == ["acquire", "release"]


def test_a_failed_shared_acquire_leaves_the_local_lock_free() -> None:
    lock = NamespaceLock(CountingMutex(fail=True))
    with pytest.raises(RemoteIOError), lock:
        pass
    acquired: list[bool] = []
    other = threading.Thread(target=lambda: acquired.append(lock._local.acquire(timeout=1)))
    other.start()
    other.join()
    assert acquired == [True]


def test_threads_of_one_process_take_turns() -> None:
    mutex = CountingMutex()
    lock = NamespaceLock(mutex)
    inside = threading.Semaphore(1)
    overlaps: list[bool] = []

    def work() -> None:
        for _ in range(200):
            with lock:
                overlaps.append(not inside.acquire(blocking=False))
                inside.release()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not any(overlaps)
    takes, passes = mutex.calls.count("acquire"), mutex.calls.count("resume")
    assert takes + passes == 800 and takes == mutex.calls.count("release")
    assert passes == mutex.calls.count("lend")


def test_a_holder_passes_the_shared_mutex_to_a_waiting_thread() -> None:
    """Under contention the shared mutex goes from thread to thread without round trips,
    and is given back once nobody waits."""
    mutex = CountingMutex()
    lock = NamespaceLock(mutex)
    second_waiting = threading.Event()

    def second() -> None:
        second_waiting.set()
        with lock:
            pass

    with lock:
        other = threading.Thread(target=second)
        other.start()
        assert second_waiting.wait(5)
        while lock._waiting == 0:  # the other thread is blocked on the lock now
            time.sleep(0.001)
    other.join(5)
    assert mutex.calls == ["acquire", "lend", "resume", "release"]


def test_passing_on_stops_after_a_while_so_other_servers_get_a_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ns_lock, "PASS_ON_FOR", 0.05)
    monkeypatch.setattr(ns_lock, "YIELD_FOR", 0.02)
    mutex = CountingMutex()
    lock = NamespaceLock(mutex)
    stop = time.monotonic() + 0.5

    def work() -> None:
        while time.monotonic() < stop:
            with lock:
                time.sleep(0.002)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    takes = mutex.calls.count("acquire")
    assert mutex.calls.count("resume") > takes  # mostly passed on...
    assert 3 <= takes <= 25  # ...but given back and taken again every 0.05 s or so
    assert takes == mutex.calls.count("release")
