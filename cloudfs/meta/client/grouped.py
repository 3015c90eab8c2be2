"""GroupedCalls: calls that queue while one is in flight go out together, as one.

A database's group commit, for a client's calls that can be merged (the tree
service's ``ReleaseMany``): a caller whose call finds none in flight sends it
at once, alone, so a lone caller waits no longer than before; calls made
while one is in flight queue, and the first of them to find the way free
sends every queued one (up to ``max_items``) in one request. Each caller
returns when the request holding its item has been answered, and gets that
request's error, so the call keeps its synchronous meaning.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Ticket(Generic[T]):
    __slots__ = ("done", "error", "item")

    def __init__(self, item: T) -> None:
        self.item = item
        self.done = False
        self.error: BaseException | None = None


class GroupedCalls(Generic[T]):
    def __init__(self, send: Callable[[list[T]], None], max_items: int) -> None:
        """``send(items)``: one request for all of ``items`` (at most ``max_items``)."""
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self._send = send
        self._max = max_items
        self._cond = threading.Condition()
        self._queued: list[_Ticket[T]] = []
        self._sending = False

    def call(self, item: T) -> None:
        """Send ``item`` (alone or with others queued meanwhile); raises what its request
        raised."""
        ticket = _Ticket(item)
        with self._cond:
            self._queued.append(ticket)
            while not ticket.done:
                if self._sending:
                    self._cond.wait()
                    continue
                batch = self._queued[: self._max]
                del self._queued[: self._max]
                self._sending = True
                self._cond.release()
                try:
                    error = self._sent(batch)
                finally:
                    self._cond.acquire()
                for sent in batch:
                    sent.done, sent.error = True, error
                self._sending = False
                self._cond.notify_all()
        if ticket.error is not None:
            raise _own_copy(ticket.error)

    def _sent(self, batch: list[_Ticket[T]]) -> BaseException | None:
        try:
            self._send([ticket.item for ticket in batch])
        except Exception as exc:  # every caller in the batch gets it
            return exc
        return None


def _own_copy(error: BaseException) -> BaseException:
    """A copy for one caller to raise (each sets its own traceback), or ``error`` itself
    where its class cannot be rebuilt from its args."""
    try:
        return copy.copy(error)
    except Exception:
        return error
