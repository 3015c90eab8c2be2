"""NamespaceLock: reentrant in a process, the shared mutex taken once per outermost holder."""

from __future__ import annotations

import threading

import pytest

from cloudfs.errors import RemoteIOError
from cloudfs.meta.server.ns_lock import NamespaceLock


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
    assert mutex.calls.count("acquire") == mutex.calls.count("release") == 800
