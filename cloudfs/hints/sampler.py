"""PyTorch: a sampler that announces each epoch's file order to the CloudFS mount.

    from cloudfs.torch import CloudFSSampler
    sampler = CloudFSSampler(paths, shuffle=True, seed=0)  # or wrap a DistributedSampler
    loader = DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=8)

The mount then fetches ahead of the job along the order and evicts by it
(docs/training.md). torch is an optional dependency (``cloudfs[torch]``); this
module is the only one that imports it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Protocol

import torch
from torch.utils.data import Sampler

from cloudfs.hints.cache_first import cache_first
from cloudfs.hints.naming import default_job_name

__all__ = ["CloudFSSampler"]

log = logging.getLogger(__name__)

# Orders longer than this are announced from a thread: the mount resolves some
# 20,000 paths a second, and the loader should not wait a minute for ImageNet.
BACKGROUND_PATHS = 50_000


class _Announcement(Protocol):
    def close(self) -> None: ...


class _HintsAPI(Protocol):
    """What this module uses of ``cloudfs.hints`` (tests stand a fake in through ``_hints``)."""

    def announce(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        job: str | None = None,
        epoch: int = 0,
        rank: int = 0,
    ) -> _Announcement: ...

    def cached(self, paths: Sequence[str | os.PathLike[str]]) -> list[bool]: ...


def _hints() -> _HintsAPI:
    from cloudfs import hints

    return hints


class CloudFSSampler(Sampler[int]):
    """Yields a sampler's indices and announces each epoch's file order to the mount.

    ``paths[i]`` is the file of dataset index ``i``. ``sampler`` is any sampler
    or iterable of indices; without one, a seeded shuffle (``torch.randperm``
    with a generator seeded ``seed + epoch``), or ``range(len(paths))`` when
    ``shuffle`` is false. A wrapped ``DistributedSampler`` follows
    ``set_epoch`` and its rank labels the job's figures on the mount.

    ``__iter__`` draws the whole epoch's order, announces it, and returns an
    iterator over it. For a map-style dataset the DataLoader calls it in the
    main process whatever ``num_workers`` is (workers receive index batches,
    never the sampler), so one announcement covers all workers, with fork or
    spawn. The announcement stays open until the next epoch's replaces it
    (the previous one is closed after the new one is made, so the mount never
    goes without an order) or ``close()``.

    Epochs: as with ``DistributedSampler``, the epoch is what ``set_epoch``
    said (0 by default). If ``set_epoch`` was not called since the last
    ``__iter__``, each ``__iter__`` after the first advances the epoch by one
    (and passes it on to the wrapped sampler's ``set_epoch``), so epochs differ
    even in a loop that never calls it.

    ``cache_first=True`` asks the mount which files are cached and reads those
    first within each window of ``window`` places (``cloudfs.hints.cache_first``
    says what that does to randomness).

    Announcing never stops training: if the mount cannot be reached or refuses
    the order, one warning is logged and the order is yielded all the same.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        sampler: Sampler[int] | Iterable[int] | None = None,
        *,
        shuffle: bool = True,
        seed: int = 0,
        cache_first: bool = False,
        window: int = 1024,
        job: str | None = None,
    ) -> None:
        super().__init__()
        if window < 1:
            raise ValueError(f"window must be at least 1, not {window}")
        self.paths = paths
        self.sampler = sampler
        self.shuffle = shuffle
        self.seed = seed
        self.cache_first = cache_first
        self.window = window
        self.job = job or default_job_name()
        self.epoch = 0
        self.announcement: _Announcement | None = None
        self._lock = threading.Lock()  # self.announcement, set from a background announce
        self._drawn = 0  # epochs drawn so far; an announcement knows which it was
        self._landed = 0  # the newest drawn epoch whose announcement was made
        self._epoch_set = False
        self._iterated = False

    @property
    def rank(self) -> int:
        """The wrapped sampler's rank, else torch.distributed's, else ``$RANK`` (0)."""
        rank = getattr(self.sampler, "rank", None)
        if isinstance(rank, int):
            return rank
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return int(torch.distributed.get_rank())
        return int(os.environ.get("RANK") or 0)

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next ``__iter__``; passed on to the wrapped sampler's ``set_epoch``."""
        self.epoch = epoch
        self._epoch_set = True
        self._forward_epoch()

    def __iter__(self) -> Iterator[int]:
        if self._iterated and not self._epoch_set:
            self.epoch += 1
            self._forward_epoch()
        self._epoch_set = False
        self._iterated = True
        order = self._draw()
        if self.cache_first:
            order = cache_first(order, self._cached(order), self.window)
        self._announce(order)
        return iter(order)

    def __len__(self) -> int:
        if isinstance(self.sampler, Sized):
            return len(self.sampler)
        return len(self.paths)

    def close(self) -> None:
        """End the current announcement (the mount stops fetching for this job)."""
        with self._lock:
            previous, self.announcement = self.announcement, None
        if previous is not None:
            previous.close()

    def _forward_epoch(self) -> None:
        set_epoch = getattr(self.sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(self.epoch)

    def _draw(self) -> list[int]:
        if self.sampler is not None:
            return [int(i) for i in self.sampler]
        if not self.shuffle:
            return list(range(len(self.paths)))
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        order: list[int] = torch.randperm(len(self.paths), generator=generator).tolist()
        return order

    def _cached(self, order: list[int]) -> list[bool]:
        try:
            return _hints().cached([self.paths[i] for i in order])
        # Like announcing, asking is advice: any failure (OSError, HintError, a bad
        # answer) reads the epoch in the drawn order instead.
        except Exception as e:
            log.warning("cloudfs: cannot ask the mount which files are cached (%s)", e)
            return [False] * len(order)

    def _announce(self, order: list[int]) -> None:
        self._drawn += 1
        if len(order) <= BACKGROUND_PATHS:
            self._announce_now(order, self.epoch, self.rank, self._drawn)
            return
        threading.Thread(
            target=self._announce_now,
            args=(order, self.epoch, self.rank, self._drawn),
            name="cloudfs-announce",
            daemon=True,
        ).start()

    def _announce_now(self, order: list[int], epoch: int, rank: int, drawn: int) -> None:
        announcement = None
        try:
            announcement = _hints().announce(
                (self.paths[i] for i in order), job=self.job, epoch=epoch, rank=rank
            )
        # An announcement is advice to the mount: whatever fails (the socket's
        # OSError, the hints module's HintError, a bad path), training goes on.
        except Exception as e:
            log.warning(
                "cloudfs: epoch %d's order was not announced, reading it unannounced (%s)",
                epoch,
                e,
            )
        finally:
            with self._lock:
                if drawn > self._landed:  # the newest yet: it replaces the current one
                    self._landed = drawn
                    previous, self.announcement = self.announcement, announcement
                else:  # a later epoch's announcement landed first: this one is stale
                    previous = announcement
            if previous is not None:
                previous.close()
