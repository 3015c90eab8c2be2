"""Tell CloudFS mounts the order a job will read its files in.

    from cloudfs import hints
    with hints.announce(epoch_paths, job="resnet", epoch=3):
        train_one_epoch()

``announce`` sends the paths, in reading order, to the mount(s) holding them,
over each mount's hints socket (open to every user; the mount checks that the
caller may read each file). The mount then fetches ahead of the job along the
order and evicts by it (``cloudfs.epoch``). The returned ``Announcement`` keeps
the order alive: closing it ends it (when ``close`` returns, each mount has
ended the job and its figures are final); the process ending ends it too,
and the mount stops fetching for it within a second. A new announcement of
the same job and rank replaces the previous one.

Paths outside every CloudFS mount are skipped with one warning; paths a mount
cannot take (missing, not readable by this user, not regular files) are
skipped by it and counted in ``Announcement.skipped``. Paths are sent in
chunks as they come from the iterable, so an order of millions of files takes
bounded memory here. ``cached`` says which files a mount holds completely
(``CloudFSSampler(cache_first=True)`` reads those first).

This package is the trainer integration's client side, all of it: the hints
API here, its socket client (``client.py``), cache-first ordering
(``cache_first.py``) and the PyTorch sampler (``sampler.py``, public as
``cloudfs.torch``). The mount side is ``cloudfs.epoch``.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from types import TracebackType

from cloudfs.hints.client import HintError, MountConnection, Router
from cloudfs.hints.naming import default_job_name

__all__ = ["Announcement", "HintError", "announce", "cached", "default_job_name"]

log = logging.getLogger(__name__)

CHUNK = 5_000  # paths a line


class Announcement:
    """A live announcement; ``close`` (or leaving the ``with`` block) ends it."""

    def __init__(self, connections: list[MountConnection], outside: int) -> None:
        self._connections = connections
        self.accepted = 0
        self.skipped = outside
        self.reasons: Counter[str] = Counter()
        if outside:
            self.reasons["outside any CloudFS mount"] = outside
        self.cached_ratio: dict[str, float] = {}
        for connection in connections:
            answer = connection.answer
            self.accepted += int(answer.get("accepted", 0))
            for reason, count in dict(answer.get("skipped", {})).items():
                self.skipped += int(count)
                self.reasons[str(reason)] += int(count)
            self.cached_ratio[connection.mountpoint] = float(answer.get("cached", 0.0))

    @property
    def mounts(self) -> list[str]:
        return [c.mountpoint for c in self._connections]

    def close(self) -> None:
        """End the order; once this returns, each mount has ended the job (its
        ``cloudfs_job_*`` figures are final and marked finished)."""
        for connection in self._connections:
            connection.start_ending()
        for connection in self._connections:
            connection.wait_ended()
            connection.close()
        self._connections = []

    def __enter__(self) -> Announcement:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def announce(
    paths: Iterable[str | os.PathLike[str]],
    *,
    job: str | None = None,
    epoch: int = 0,
    rank: int = 0,
    detach: bool = False,
) -> Announcement:
    """Announce that this job reads ``paths`` in this order (see the module docstring).

    ``job`` defaults to ``$CLOUDFS_JOB``, else the program's name and pid. A
    ``detach``-ed announcement outlives this process: the mount ends it when
    its files go unread for two minutes (what ``cloudfs hint`` sends).
    Raises ``HintError`` when a mount does not answer or refuses the request.
    """
    name = job or default_job_name()
    router = Router()
    request = {"op": "announce", "job": name, "rank": rank, "epoch": epoch, "detach": detach}
    outside = 0
    pending: dict[str, list[str]] = {}
    try:
        for path in paths:
            routed = router.route(os.fspath(path))
            if routed is None:
                outside += 1
                continue
            mountpoint, relative = routed
            batch = pending.setdefault(mountpoint, [])
            batch.append(relative)
            if len(batch) >= CHUNK:
                router.connection(mountpoint, request).send({"paths": batch})
                pending[mountpoint] = []
        for mountpoint, batch in pending.items():
            connection = router.connection(mountpoint, request)
            if batch:
                connection.send({"paths": batch})
        connections = router.connections()
        for connection in connections:
            connection.finish(detach)
    except BaseException:
        router.close()
        raise
    if outside:
        log.warning("cloudfs.hints: %d of the announced paths are on no CloudFS mount", outside)
    return Announcement(connections, outside)


def cached(paths: Sequence[str | os.PathLike[str]]) -> list[bool]:
    """For each path: whether its mount holds every byte of the file (False off CloudFS)."""
    router = Router()
    out = [False] * len(paths)
    by_mount: dict[str, list[tuple[int, str]]] = {}
    for i, path in enumerate(paths):
        routed = router.route(os.fspath(path))
        if routed is not None:
            by_mount.setdefault(routed[0], []).append((i, routed[1]))
    for mountpoint, items in by_mount.items():
        for start in range(0, len(items), CHUNK):
            chunk = items[start : start + CHUNK]
            answer = router.ask(mountpoint, {"op": "cached", "paths": [p for _, p in chunk]})
            for (i, _), held in zip(chunk, answer.get("cached", []), strict=False):
                out[i] = bool(held)
    return out
