"""The mount's side of ``cloudfs flush`` and ``cloudfs umount``: write-back control handlers.

* ``flush``: ``{"timeout": seconds}``; waits until every closed file is in
  the UFS, sending a progress event (the backlog: ``files``, ``bytes``,
  ``oldest_age``, ``failures``) every ``PROGRESS_SECONDS``; the result says
  whether it ``drained`` and what is left.
* ``backlog``: the backlog now, and whether (and how long) unmount drains it.
* ``drain_on_exit``: ``{"drain": bool}``; whether the mount process waits for
  the backlog when it is unmounted (``cloudfs umount --no-drain`` turns it off:
  what is left stays in the journal for the next mount of the volume).

A mount in write-through mode has no backlog: ``flush`` returns at once.
"""

from __future__ import annotations

from dataclasses import asdict

import trio

from cloudfs.control.server import Emit, Handler
from cloudfs.data.uploader import Backlog, Uploader
from cloudfs.errors import InvalidArgument
from cloudfs.lib.jsonlines import Message

PROGRESS_SECONDS = 0.5
EMPTY = Backlog(files=0, bytes=0, oldest_age=0.0, failures=0, uploading=0)


class WritebackControl:
    def __init__(self, uploader: Uploader | None, drain_timeout: float) -> None:
        self._uploader = uploader
        self.drain_timeout = drain_timeout
        self.drain_on_exit = uploader is not None and drain_timeout > 0

    def handlers(self) -> dict[str, Handler]:
        return {"flush": self.flush, "backlog": self.backlog, "drain_on_exit": self.set_drain}

    async def drain_before_exit(self) -> Backlog | None:
        """Unmounted: wait (bounded) for the backlog, unless told not to. Returns what the
        drain left owed (None: nothing, or no drain was asked for)."""
        if self._uploader is not None and self.drain_on_exit:
            with trio.move_on_after(self.drain_timeout):
                await self._uploader.drain()
            left = self._uploader.backlog()
            return left if left.files else None
        return None

    async def flush(self, request: Message, emit: Emit) -> Message:
        timeout = request.get("timeout")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout < 0):
            raise InvalidArgument("timeout must be a number of seconds >= 0")
        uploader = self._uploader
        drained = False
        if uploader is not None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._report, uploader, emit)
                with trio.move_on_after(float("inf") if timeout is None else float(timeout)):
                    await uploader.drain()
                    drained = True
                nursery.cancel_scope.cancel()
        else:
            drained = True
        return {"drained": drained, **self._snapshot()}

    async def backlog(self, request: Message, emit: Emit) -> Message:
        return {
            "drain_on_exit": self.drain_on_exit,
            "drain_timeout": self.drain_timeout,
            **self._snapshot(),
        }

    async def set_drain(self, request: Message, emit: Emit) -> Message:
        drain = request.get("drain")
        if not isinstance(drain, bool):
            raise InvalidArgument("drain must be true or false")
        self.drain_on_exit = drain and self._uploader is not None
        return {"drain_on_exit": self.drain_on_exit}

    async def _report(self, uploader: Uploader, emit: Emit) -> None:
        while True:
            await emit(asdict(uploader.backlog()))
            await trio.sleep(PROGRESS_SECONDS)

    def _snapshot(self) -> Message:
        return asdict(self._uploader.backlog() if self._uploader is not None else EMPTY)
