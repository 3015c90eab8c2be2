"""SequentialStream: one open GET that feeds a sequential reader's read-ahead.

A ranged GET per read-ahead batch costs a request round trip each time, and
on some S3-compatible servers (moto, see BASELINE.md) a ranged GET costs time
in proportion to the whole object. A reader that goes through a large object
from start to end is better served by one GET of the rest of the object, read
block by block as the read-ahead window advances: this class keeps that GET
open for one ``ReadCursor``.

The reader claims each batch's flights (as for a ranged GET) and ``submit``s
them; the stream's task takes what the disk tier holds from there, reads the
other blocks from the GET in order, and resolves the flights.
A batch that does not start where the stream is (the reader skipped cached
blocks, or seeked) is reached by reading past at most ``MAX_SKIP_BLOCKS``
blocks, or else by opening a new GET there. The GET is closed when the stream
has been idle for ``IDLE_SECONDS``, on an error, or when its nursery is
cancelled. Flights it did not resolve are failed with the store's error
(``FsError``: readers waiting for them get it, as from their own GET) or
otherwise abandoned (readers then fetch the blocks themselves), and
``release(n)`` is told about every block it is done with, resolved or not, so
the reader's read-ahead budget stays exact.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import BinaryIO

import trio

from cloudfs.data.blocks import ObjectRef
from cloudfs.data.loader import BlockLoader, Claimed
from cloudfs.errors import FsError

log = logging.getLogger(__name__)

IDLE_SECONDS = 5.0
MAX_SKIP_BLOCKS = 2
DISK_QUEUE_BLOCKS = 2


class SequentialStream:
    def __init__(self, loader: BlockLoader, ref: ObjectRef, release: Callable[[int], None]) -> None:
        self.ref = ref
        self._loader = loader
        self._release = release
        self._send, self._receive = trio.open_memory_channel[Claimed](math.inf)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, claimed: Claimed) -> bool:
        """Queue a batch of claimed blocks; False if the stream has finished (fetch otherwise)."""
        if self._closed:
            return False
        self._send.send_nowait(claimed)
        return True

    async def run(self) -> None:
        # Disk writes go to a second task, so the GET is read while blocks are
        # written; the channel's size bounds the blocks waiting for the disk.
        send, receive = trio.open_memory_channel[tuple[str, bytes]](DISK_QUEUE_BLOCKS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write_to_disk, receive)
            async with send:
                await self._read(send)

    async def _write_to_disk(self, receive: trio.MemoryReceiveChannel[tuple[str, bytes]]) -> None:
        async with receive:
            async for keyed in receive:
                await self._loader.disk_store([keyed])

    async def _read(self, to_disk: trio.MemorySendChannel[tuple[str, bytes]]) -> None:
        body: BinaryIO | None = None
        buffer: bytearray | None = None  # the body is read into it, block by block; an idle
        # stream (which returns) frees it
        position = -1  # the block index ``body`` is at
        batch: Claimed = []
        error: FsError | None = None
        try:
            while True:
                with trio.move_on_after(IDLE_SECONDS):
                    batch = list(await self._receive.receive())
                if not batch:
                    return
                held = len(batch)
                batch = await self._loader.from_disk(self.ref, batch, prefetch=True)
                self._release(held - len(batch))
                if batch and buffer is None:
                    buffer = bytearray(self._loader.block_size)
                while batch:
                    index, flight = batch[0]
                    if body is None or not 0 <= index - position <= MAX_SKIP_BLOCKS:
                        if body is not None:
                            await self._loader.close_stream(body)
                            body = None
                        body = await self._loader.open_stream(self.ref, index)
                        position = index
                    while position < index:  # read past blocks someone else has
                        await self._loader.read_block(body, self.ref, position, buffer)
                        position += 1
                    data = await self._loader.read_block(body, self.ref, index, buffer)
                    position += 1
                    batch.pop(0)
                    self._release(1)
                    keyed = self._loader.hand_over(self.ref, index, data, flight, to_memory=True)
                    await to_disk.send(keyed)
                batch = []  # the buffer is kept for the next batch: zeroing a fresh
                # block-sized one held the event loop (65% of a cold read's GIL time)
        except FsError as exc:  # the store failed, after its own retries: waiters get it
            log.debug("read-ahead stream of %s failed: %r", self.ref.key, exc)
            error = exc
        except Exception as exc:  # best effort: readers fetch what was not delivered
            log.debug("read-ahead stream of %s stopped: %r", self.ref.key, exc)
        finally:
            self._closed = True
            self._send.close()
            leftovers = batch + [item for queued in _drain(self._receive) for item in queued]
            for _, flight in leftovers:
                if error is not None:
                    flight.fail(error)
                else:
                    flight.abandon()
            self._release(len(leftovers))
            if body is not None:
                await self._loader.close_stream(body)


def _drain(receive: trio.MemoryReceiveChannel[Claimed]) -> list[Claimed]:
    batches = []
    while True:
        try:
            batches.append(receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return batches
