"""StagingSpace: the bound on bytes held in the staging area.

The staging area holds the staged copies of files being written and the
write-back journal of closed files not uploaded yet. With a limit
(``--staging-size``), a write that would take the area past it waits for
uploads to free space (backpressure), polling every ``POLL_SECONDS``, for at
most ``wait`` seconds; then it fails with ENOSPC and a log line that says
why. Nothing already written is dropped.

Staged copies are charged by their logical size (a copy-on-write file over a
large object will need all of it when it is materialized for upload); the
journal is charged by what the uploader still owes (``journal_bytes``).
Trio thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from cloudfs.errors import NoSpace

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1


class StagingSpace:
    def __init__(self, limit: int = 0, wait: float = 60.0) -> None:
        """``limit`` 0: no bound but the disk's own."""
        self.limit = limit
        self.wait = wait
        self._staged = 0
        self._journal_bytes: Callable[[], int] = lambda: 0

    def count_journal(self, journal_bytes: Callable[[], int]) -> None:
        """Charge the write-back journal: ``journal_bytes()`` is what it holds now."""
        self._journal_bytes = journal_bytes

    @property
    def used(self) -> int:
        return self._staged + self._journal_bytes()

    async def reserve(self, nbytes: int, what: str) -> None:
        """Charge ``nbytes`` more, waiting for room; ``NoSpace`` after ``wait`` seconds."""
        if nbytes <= 0:
            return
        if self.limit and self.used + nbytes > self.limit:
            with trio.move_on_after(self.wait):
                # The journal shrinks inside the uploader; polling a full area
                # (a rare state) is simpler than threading its events through.
                while self.used + nbytes > self.limit:  # noqa: ASYNC110
                    await trio.sleep(POLL_SECONDS)
            if self.used + nbytes > self.limit:
                log.error(
                    "staging area full: %s needs %s more, %s of %s held by files being written"
                    " and uploads not done after %g s: ENOSPC",
                    what, _mib(nbytes), _mib(self.used), _mib(self.limit),
                    self.wait,
                )  # fmt: skip
                raise NoSpace(f"staging area full ({_mib(self.limit)})")
        self._staged += nbytes

    def release(self, nbytes: int) -> None:
        self._staged -= max(0, nbytes)


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1024 * 1024):.1f} MiB"
