"""``S3ReadStream``: a GetObject body as a file object whose errors are ``cloudfs.errors``.

``S3ObjectStore.get_stream`` returns one; a ranged GET that goes through botocore
reads its body with one. ``readinto`` reads from the socket straight into the
caller's buffer where the body allows it.
"""

from __future__ import annotations

import http.client
import io
from typing import TYPE_CHECKING, Any

from cloudfs.errors import RemoteIOError
from cloudfs.ufs.s3_errors import translating

if TYPE_CHECKING:
    from botocore.response import StreamingBody


def _http_body(body: StreamingBody) -> http.client.HTTPResponse | None:
    """The http.client response under a botocore body, when it can be read directly.

    Only for a body botocore reads raw (urllib3's ``decode_content`` off, its
    default for S3): then urllib3 adds nothing but bookkeeping on top of it.
    """
    raw = getattr(body, "_raw_stream", None)
    fp = getattr(raw, "_fp", None)
    if not isinstance(fp, http.client.HTTPResponse) or getattr(raw, "decode_content", True):
        return None
    return fp


class S3ReadStream(io.RawIOBase):
    """A GetObject body as a file object whose read errors are ``cloudfs.errors``.

    A read timeout in the middle of a body is not retried by botocore; the
    reader sees ``RemoteIOError`` and may reopen from its current offset.
    """

    def __init__(self, body: StreamingBody, key: str, skip: int = 0) -> None:
        super().__init__()
        self._body = body
        self._key = key
        # Servers that ignore Range answer 200 with the whole object: drop the head.
        while skip > 0:
            chunk = self.read(min(skip, 1 << 20))
            if not chunk:
                break
            skip -= len(chunk)

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        with translating(self._key):
            return self._body.read(None if size is None or size < 0 else size)

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any, /) -> int:
        """Fill ``buffer`` from the body; the count is short only at the end.

        The bytes go from the socket straight into ``buffer`` (http.client's
        ``readinto`` under urllib3: botocore asks for the raw, undecoded body),
        without the per-read ``bytes`` objects of ``read``. Where the body is
        not an http.client response (tests, other transports) it falls back
        to ``read`` and a copy.
        """
        view = memoryview(buffer).cast("B")
        raw = _http_body(self._body)
        if raw is None:
            data = self.read(len(view))
            view[: len(data)] = data
            return len(data)
        got = 0
        try:
            while got < len(view):
                n = raw.readinto(view[got:])
                if not n:
                    if raw.length:  # http.client does not call a short body an error
                        raise http.client.IncompleteRead(b"", raw.length)
                    break
                got += n
        except (OSError, http.client.HTTPException) as exc:
            raise RemoteIOError(f"'{self._key}': S3 connection broke: {exc!r}") from exc
        return got

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()
