"""GroupedCalls: a lone call goes alone; calls made while one is in flight go as one."""

from __future__ import annotations

import errno
import threading
import time

import pytest

from cloudfs.errors import FsError
from cloudfs.meta.client.grouped import GroupedCalls

WAIT = 10.0


class Sender:
    """A ``send`` that records each request and, while ``gate`` is clear, holds the first."""

    def __init__(self, fail_with: FsError | None = None) -> None:
        self.requests: list[list[int]] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.fail_with = fail_with

    def __call__(self, items: list[int]) -> None:
        self.requests.append(items)
        if len(self.requests) == 1:
            self.entered.set()
            assert self.gate.wait(WAIT)
        if self.fail_with is not None:
            raise self.fail_with


def _threads(grouped: GroupedCalls[int], items: list[int]) -> tuple[list[threading.Thread], dict]:
    out: dict[int, object] = {}

    def run(item: int) -> None:
        try:
            grouped.call(item)
            out[item] = None
        except FsError as exc:
            out[item] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in items]
    for t in threads:
        t.start()
    return threads, out


def test_a_lone_call_is_sent_alone_at_once() -> None:
    sender = Sender()
    sender.gate.set()
    grouped = GroupedCalls(sender, max_items=8)
    grouped.call(1)
    grouped.call(2)
    assert sender.requests == [[1], [2]]


def test_calls_made_while_one_is_in_flight_go_together_up_to_the_cap() -> None:
    sender = Sender()
    grouped = GroupedCalls(sender, max_items=4)
    first, first_out = _threads(grouped, [0])
    assert sender.entered.wait(WAIT)
    rest, rest_out = _threads(grouped, list(range(1, 7)))
    deadline = time.monotonic() + WAIT
    while len(grouped._queued) < 6 and time.monotonic() < deadline:  # all six queued
        time.sleep(0.01)
    assert not rest_out, "a queued call returned before its request was sent"
    sender.gate.set()
    for t in first + rest:
        t.join(WAIT)
    assert sender.requests[0] == [0]
    assert [len(r) for r in sender.requests[1:]] == [4, 2]
    assert sorted(i for r in sender.requests for i in r) == list(range(7))
    assert set(first_out) | set(rest_out) == set(range(7))
    assert all(v is None for v in (first_out | rest_out).values())


def test_every_caller_of_a_failed_request_gets_its_error() -> None:
    sender = Sender(fail_with=FsError("tree away", errno=errno.EIO))
    grouped = GroupedCalls(sender, max_items=8)
    first, _ = _threads(grouped, [0])
    assert sender.entered.wait(WAIT)
    rest, out = _threads(grouped, [1, 2, 3])
    deadline = time.monotonic() + WAIT
    while len(grouped._queued) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sender.gate.set()
    for t in first + rest:
        t.join(WAIT)
    assert sender.requests[1] == [1, 2, 3]
    errors = [out[i] for i in (1, 2, 3)]
    assert all(isinstance(e, FsError) and e.errno == errno.EIO for e in errors)
    assert len({id(e) for e in errors}) == 3  # each caller raised its own copy


def test_a_cap_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        GroupedCalls(Sender(), max_items=0)
