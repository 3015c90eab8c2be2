"""Bearer tokens, fixed or kept in a file that is re-read when it changes (rotation).

A ``TokenFile`` looks at its file (``os.stat``: inode, size, mtime) at most
once per ``check_seconds`` and re-reads it when it changed, so a rotated
token (a Kubernetes Secret update swaps the file) is used without a restart.
Servers accept the new token at once: one that does not match is checked
against the file again before it is refused (``accepts``). The old token is
accepted until the server next looks at the file, at most ``CHECK_SECONDS``
later, and refused from then on: there is no longer grace period. Clients
send ``current()`` and, when refused, look at their file again and retry
once (``refresh``), so servers and clients given the same Secret keep
working through a rotation whichever of them sees it first.

A file that cannot be read or is empty at start is a ``UsageError``; one
that disappears or empties later (the middle of a swap) keeps the last
token, with a warning.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from cloudfs.errors import UsageError

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0


class TokenSource(Protocol):
    def current(self) -> str:
        """The token to send or accept now."""
        ...

    def refresh(self) -> bool:
        """Look at the source again now; whether the token changed."""
        ...


class StaticToken:
    """A token that never changes (``$CLOUDFS_META_TOKEN``, a storage option)."""

    def __init__(self, value: str) -> None:
        self._value = value

    def current(self) -> str:
        return self._value

    def refresh(self) -> bool:
        return False


class TokenFile:
    """The token in ``path`` (stripped), re-read when the file changes."""

    def __init__(
        self,
        path: str,
        *,
        check_seconds: float = CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._check_seconds = check_seconds
        self._clock = clock
        self._lock = threading.Lock()
        try:
            self._stamp = self._stat()
            token = Path(path).read_text().strip()
        except OSError as e:
            raise UsageError(f"cannot read token file {path}: {e.strerror}") from None
        if not token:
            raise UsageError(f"token file {path} is empty")
        self._token = token
        self._checked = clock()

    def _stat(self) -> tuple[int, int, int, int]:
        st = os.stat(self.path)
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def current(self) -> str:
        if self._clock() - self._checked >= self._check_seconds:
            self.refresh()
        return self._token

    def refresh(self) -> bool:
        with self._lock:
            self._checked = self._clock()
            try:
                stamp = self._stat()
                if stamp == self._stamp:
                    return False
                token = Path(self.path).read_text().strip()
            except OSError as e:
                log.warning("token file %s: %s; keeping the last token", self.path, e.strerror)
                return False
            if not token:
                log.warning("token file %s is empty; keeping the last token", self.path)
                return False
            self._stamp = stamp
            changed, self._token = token != self._token, token
        if changed:
            log.info("token file %s changed: using the new token", self.path)
        return changed


Token = str | TokenSource


def token_source(token: Token | None) -> TokenSource | None:
    """``token`` as a source: a string is a ``StaticToken``."""
    if token is None or isinstance(token, (StaticToken, TokenFile)):
        return token
    if isinstance(token, str):
        return StaticToken(token) if token else None
    return token


def accepts(source: TokenSource | None, sent: str | None) -> bool:
    """Whether ``sent`` (the ``Authorization`` header) is ``Bearer <token>``: constant time,
    and on a mismatch the source is looked at again before refusing (a rotation)."""
    if source is None:
        return True
    given = (sent or "").encode()
    if hmac.compare_digest(given, f"Bearer {source.current()}".encode()):
        return True
    return source.refresh() and hmac.compare_digest(given, f"Bearer {source.current()}".encode())
