"""Mounting, serving and unmounting one pyfuse3 session under trio."""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable

import pyfuse3
import trio

from cloudfs import mountinfo
from cloudfs.errors import StartupError

log = logging.getLogger(__name__)

# Kernel read-ahead for the mount's backing device. 128 KiB by default, which
# also caps FUSE read requests at 128 KiB; larger means fewer, larger requests.
READ_AHEAD_KB = 1024


def mount_options(
    ufs_uri: str, *, read_only: bool, allow_other: bool, debug: bool = False
) -> set[str]:
    # noatime: reads do not update atime (a write to the tree per read of a
    # training sample would cost more than it tells); utime still sets it.
    options = {f"fsname={_fsname(ufs_uri)}", "subtype=cloudfs", "default_permissions", "noatime"}
    if read_only:
        options.add("ro")
    if allow_other:
        options.add("allow_other")
    if debug:
        options.add("debug")
    return options


def _fsname(ufs_uri: str) -> str:
    # mount options are comma-separated: keep the source readable but safe
    return "cloudfs:" + ufs_uri.replace(",", "%2C").replace(" ", "%20")


def reads_without_open() -> bool:
    """Whether this pyfuse3 passes the inode to ``read`` when the kernel skipped ``open``.

    Stock pyfuse3 passes only the file handle, 0 after a skipped open, so
    dataset mode needs the patched build of ``deploy/pyfuse3/``, which says so
    in this attribute.
    """
    return bool(getattr(pyfuse3, "READ_WITHOUT_OPEN_PASSES_INODE", False))


def caches_listings() -> bool:
    """Whether this pyfuse3 lets ``opendir`` keep listings in the page cache
    (``Operations.cache_readdir``; the patched build of ``deploy/pyfuse3/``)."""
    return bool(getattr(pyfuse3, "OPENDIR_HONOURS_CACHE_READDIR", False))


def opens_without_flush() -> bool:
    """Whether this pyfuse3 can tell the kernel to send no FLUSH for a handle
    (``FileInfo.noflush``; the patched build of ``deploy/pyfuse3/``)."""
    return bool(getattr(pyfuse3, "OPEN_HONOURS_NOFLUSH", False))


def receiver_counts() -> Callable[[], tuple[int, int, int]] | None:
    """(ioctls answered in C, requests queued for Python, event-loop wake-ups) of the
    patched pyfuse3's receiver thread, or None for a build without it
    (``deploy/pyfuse3/receive-loop.patch``)."""
    counts = getattr(pyfuse3, "receiver_counts", None)
    return counts if callable(counts) else None


def start(ops: pyfuse3.Operations, mountpoint: str, options: set[str]) -> None:
    """Mount on ``mountpoint`` (a resolved path); the kernel then queues requests for ``serve``.

    Until ``serve`` runs, this process must not touch the mountpoint itself.
    """
    try:
        pyfuse3.init(ops, mountpoint, options)
    except RuntimeError as e:
        raise StartupError(f"cannot mount on {mountpoint}: {e}") from e


async def raise_read_ahead(mountpoint: str) -> None:
    """Raise the kernel read-ahead once FUSE INIT is done (INIT clamps it to 128 KiB).

    INIT is the first request ``serve`` answers; setting the value before it
    is undone by the kernel, so this runs as a task of ``serve``.
    """
    for delay in (0.2, 1.0, 3.0):
        await trio.sleep(delay)
        if await trio.to_thread.run_sync(_raise_read_ahead, mountpoint):
            return


def _raise_read_ahead(mountpoint: str) -> bool:
    # The device number comes from mountinfo: a stat() of the mountpoint would
    # wait for this very process to answer GETATTR, which it cannot do yet.
    try:
        device = _device_of(mountpoint)
        if device is None:
            return True
        path = f"/sys/class/bdi/{device}/read_ahead_kb"
        with open(path, "w") as f:
            f.write(str(READ_AHEAD_KB))
        with open(path) as f:
            return int(f.read()) >= READ_AHEAD_KB
    except (OSError, ValueError) as e:  # not fatal: only larger requests are lost
        log.info("could not raise read-ahead of %s: %s", mountpoint, e)
        return True


def _device_of(mountpoint: str) -> str | None:
    """ "major:minor" of the newest mount at ``mountpoint``."""
    mount = mountinfo.topmost(mountinfo.read(), mountpoint)
    return mount.device if mount is not None else None


async def serve(
    background: Callable[[trio.Nursery], Awaitable[None]] | None = None,
    before_stop: Callable[[], Awaitable[None]] | None = None,
) -> bool:
    """Answer kernel requests until unmounted or SIGTERM/SIGINT, then stop ``background``.

    ``before_stop`` runs after the last kernel request, while ``background``
    still runs (the write-back drain).

    Returns True when a signal ended it (the filesystem is still mounted and
    ``stop(unmount=True)`` must unmount it), False when it was unmounted.
    """
    signalled = trio.Event()
    async with trio.open_nursery() as nursery:
        if background is not None:
            await background(nursery)
        nursery.start_soon(_terminate_on_signal, signalled)
        await pyfuse3.main(min_tasks=4, max_tasks=64)
        if before_stop is not None:
            await before_stop()
        nursery.cancel_scope.cancel()
    return signalled.is_set()


async def _terminate_on_signal(signalled: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("signal %d: unmounting", signum)
            signalled.set()
            pyfuse3.terminate()
            return


def stop(*, unmount: bool) -> None:
    pyfuse3.close(unmount=unmount)
