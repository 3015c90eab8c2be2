"""ThreadFlights: concurrent callers of one key, on many threads, share one fetch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from cloudfs.errors import RemoteIOError
from cloudfs.peers.flights import ThreadFlights

CALLERS = 16


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_concurrent_callers_of_one_key_share_one_fetch() -> None:
    flights: ThreadFlights[str, bytes] = ThreadFlights()
    calls = 0
    started = threading.Event()
    release = threading.Event()
    lock = threading.Lock()

    def fetch() -> bytes:
        nonlocal calls
        with lock:
            calls += 1
        started.set()
        assert release.wait(10)
        return b"block"

    with ThreadPoolExecutor(CALLERS + 1) as pool:  # every caller, and one of another key
        first = pool.submit(flights.do, "k", fetch)
        assert started.wait(10)
        rest = [pool.submit(flights.do, "k", fetch) for _ in range(CALLERS - 1)]
        other = pool.submit(flights.do, "other", lambda: b"other")
        assert other.result(10) == (b"other", True)  # another key does not wait
        _until(lambda: flights.followers("k") == CALLERS - 1)
        release.set()
        results = [first.result(10), *(f.result(10) for f in rest)]
    assert calls == 1
    assert all(value == b"block" for value, _ in results)
    assert [led for _, led in results].count(True) == 1
    assert len(flights) == 0


def test_every_caller_gets_the_fetch_error_and_the_next_call_fetches_again() -> None:
    flights: ThreadFlights[str, bytes] = ThreadFlights()
    started = threading.Event()
    release = threading.Event()

    def failing() -> bytes:
        started.set()
        assert release.wait(10)
        raise RemoteIOError("the store is down")

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(flights.do, "k", failing)
        assert started.wait(10)
        rest = [pool.submit(flights.do, "k", failing) for _ in range(3)]
        _until(lambda: flights.followers("k") == 3)
        release.set()
        for future in [first, *rest]:
            with pytest.raises(RemoteIOError, match="store is down"):
                future.result(10)
    assert flights.do("k", lambda: b"now") == (b"now", True)


def test_a_follower_gives_up_after_its_wait() -> None:
    flights: ThreadFlights[str, bytes] = ThreadFlights(wait_seconds=0.05)
    started = threading.Event()
    release = threading.Event()

    def slow() -> bytes:
        started.set()
        assert release.wait(10)
        return b"late"

    with ThreadPoolExecutor(2) as pool:
        leader = pool.submit(flights.do, "k", slow)
        assert started.wait(10)
        with pytest.raises(RemoteIOError, match="no answer"):
            flights.do("k", slow)
        release.set()
        assert leader.result(10) == (b"late", True)
