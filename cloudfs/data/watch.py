"""What the read path tells about each read of a file, for whoever follows jobs.

``ObjectReader.read`` reports reads that name their inode to its ``watch``
(``cloudfs.epoch.board.JobBoard``): how many bytes, whether every block was
held by a tier when asked, and how long the read waited when one was not.
``active`` is checked first, so a mount without announced jobs pays one
attribute read per request.
"""

from __future__ import annotations

from typing import Protocol


class ReadWatch(Protocol):
    @property
    def active(self) -> bool: ...

    def read_started(self, inode: int) -> None:
        """A read of ``inode`` begins (before any block it fetches is stored)."""
        ...

    def read_done(self, inode: int, nbytes: int, held: bool, waited: float, *, eof: bool) -> None:
        """A read of ``inode`` returned ``nbytes``; ``held``: no block had to be fetched;
        ``waited``: seconds it spent waiting for a fetch (0 when held); ``eof``: it
        reached the end of the file."""
        ...
