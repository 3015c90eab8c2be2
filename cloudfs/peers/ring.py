"""Ring: which member of a cache group owns a block (rendezvous hashing).

Every member gets a score per block key, a hash of (member, key); the owner
is the member with the highest score. Why rendezvous rather than a ring of
virtual nodes: with N members, adding one takes over exactly the keys where
it scores highest (about 1/(N+1) of them, each from whoever owned it) and
removing one hands only its own keys to their runners-up, with no virtual
nodes to tune and no table to build; the cost is one hash per member per
block, about a microsecond each, for groups of tens of workers.

Deterministic on every node: the score depends only on the member's name as
written (``HOST:PORT``; spell it the same everywhere) and the block key (the
same sha256 on every node, ``cloudfs.data.blocks.block_key``). Immutable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


class Ring:
    def __init__(self, members: Iterable[str]) -> None:
        names = sorted({m.strip() for m in members if m.strip()})
        if not names:
            raise ValueError("a cache group needs at least one member")
        self.members: tuple[str, ...] = tuple(names)
        self._salts = [name.encode("utf-8") + b"\0" for name in names]

    def owner(self, key: str) -> str:
        """The member that owns block ``key``."""
        raw = key.encode("utf-8")
        best = max(range(len(self.members)), key=lambda i: _score(self._salts[i], raw))
        return self.members[best]

    def ranked(self, key: str) -> list[str]:
        """Every member, the owner of ``key`` first, then who owns it if the owner is gone."""
        raw = key.encode("utf-8")
        order = sorted(
            range(len(self.members)), key=lambda i: _score(self._salts[i], raw), reverse=True
        )
        return [self.members[i] for i in order]


def _score(salt: bytes, key: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(salt + key, digest_size=8).digest(), "big")
