"""CloudFSSampler: the order it announces is the order it yields and a DataLoader delivers.

The hints module is replaced by a fake (``cloudfs.hints.sampler._hints``); no mount is needed.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch (the cloudfs[torch] extra)")

from torch.utils.data import DataLoader, Dataset, DistributedSampler  # noqa: E402

import cloudfs.hints.sampler as cloudfs_torch  # noqa: E402
from cloudfs.hints.cache_first import cache_first  # noqa: E402
from cloudfs.torch import CloudFSSampler  # noqa: E402

N = 37  # not a multiple of the batch size nor of the replicas


def path_of(i: int) -> str:
    return f"/mnt/data/train/{i:05d}.jpg"


PATHS = [path_of(i) for i in range(N)]
INDEX = {p: i for i, p in enumerate(PATHS)}


class IndexDataset(Dataset[int]):
    """Sample i is i."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> int:
        return i


@dataclass
class FakeAnnouncement:
    indices: list[int]
    job: str | None
    epoch: int
    rank: int
    events: list[str]
    closed: bool = False

    def close(self) -> None:
        if not self.closed:
            self.events.append(f"close {self.epoch}")
        self.closed = True


@dataclass
class FakeHints:
    """Records announcements; ``held`` are the paths ``cached`` says are held."""

    held: set[str] = field(default_factory=set)
    fail: BaseException | None = None
    fail_cached: BaseException | None = None
    made: list[FakeAnnouncement] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    asked: list[list[str]] = field(default_factory=list)

    def announce(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        job: str | None = None,
        epoch: int = 0,
        rank: int = 0,
    ) -> FakeAnnouncement:
        indices = [INDEX[os.fspath(p)] for p in paths]
        if self.fail is not None:
            raise self.fail
        made = FakeAnnouncement(indices, job, epoch, rank, self.events)
        self.made.append(made)
        self.events.append(f"announce {epoch}")
        return made

    def cached(self, paths: Sequence[str | os.PathLike[str]]) -> list[bool]:
        self.asked.append([os.fspath(p) for p in paths])
        if self.fail_cached is not None:
            raise self.fail_cached
        return [os.fspath(p) in self.held for p in paths]


@pytest.fixture
def hints(monkeypatch: pytest.MonkeyPatch) -> FakeHints:
    fake = FakeHints()
    monkeypatch.setattr(cloudfs_torch, "_hints", lambda: fake)
    return fake


def delivered(loader: DataLoader[int]) -> list[int]:
    return [int(i) for batch in loader for i in batch]


@pytest.mark.parametrize(
    ("workers", "start"),
    [
        (0, None),
        (2, "fork"),
        # Spawned workers import torch afresh: seconds on a small machine.
        pytest.param(2, "spawn", marks=pytest.mark.slow),
    ],
)
def test_the_announced_order_is_what_the_loader_delivers(
    hints: FakeHints, workers: int, start: str | None
) -> None:
    """The sampler runs in the main process whatever the workers and how they start."""
    sampler = CloudFSSampler(PATHS, seed=7, job="resnet")
    loader = DataLoader(
        IndexDataset(),
        sampler=sampler,
        batch_size=4,
        num_workers=workers,
        multiprocessing_context=start,
    )
    for epoch in range(2):
        sampler.set_epoch(epoch)
        got = delivered(loader)
        announced = hints.made[-1]
        assert got == announced.indices
        assert sorted(got) == list(range(N))
        assert (announced.job, announced.epoch, announced.rank) == ("resnet", epoch, 0)
    assert hints.made[0].indices != hints.made[1].indices


def test_the_announced_order_is_what_the_sampler_yields(hints: FakeHints) -> None:
    sampler = CloudFSSampler(PATHS)
    yielded = list(sampler)
    assert yielded == hints.made[-1].indices
    assert len(sampler) == N


def test_the_announcement_is_made_before_the_first_index_is_read(hints: FakeHints) -> None:
    it = iter(CloudFSSampler(PATHS))
    assert len(hints.made) == 1
    assert next(it) == hints.made[0].indices[0]


def test_the_default_shuffle_is_seeded_by_seed_and_epoch(hints: FakeHints) -> None:
    def order(seed: int, epoch: int) -> list[int]:
        sampler = CloudFSSampler(PATHS, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert order(1, 0) == order(1, 0)
    assert order(1, 3) == order(1, 3)
    assert order(1, 0) != order(2, 0)
    assert order(1, 0) != order(1, 1)
    generator = torch.Generator()
    generator.manual_seed(1 + 3)
    assert order(1, 3) == torch.randperm(N, generator=generator).tolist()


def test_without_set_epoch_each_iteration_is_the_next_epoch(hints: FakeHints) -> None:
    sampler = CloudFSSampler(PATHS, seed=5)
    first, second, third = list(sampler), list(sampler), list(sampler)
    assert [a.epoch for a in hints.made] == [0, 1, 2]
    assert len({tuple(first), tuple(second), tuple(third)}) == 3
    sampler.set_epoch(1)
    assert list(sampler) == second  # set_epoch pins the epoch again
    assert list(sampler) == third  # and the next iteration without it moves on
    assert [a.epoch for a in hints.made] == [0, 1, 2, 1, 2]


def test_shuffle_false_reads_in_index_order(hints: FakeHints) -> None:
    sampler = CloudFSSampler(PATHS, shuffle=False)
    assert list(sampler) == list(range(N)) == hints.made[-1].indices


def test_any_iterable_of_indices_is_wrapped(hints: FakeHints) -> None:
    sampler = CloudFSSampler(PATHS, [4, 2, 2, 9])
    assert list(sampler) == [4, 2, 2, 9] == hints.made[-1].indices
    assert len(sampler) == 4


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_distributed_sampler_is_followed(hints: FakeHints, shuffle: bool) -> None:
    def shard(epoch: int) -> list[int]:
        reference = DistributedSampler(
            IndexDataset(), num_replicas=2, rank=1, shuffle=shuffle, seed=3
        )
        reference.set_epoch(epoch)
        return list(reference)

    inner = DistributedSampler(IndexDataset(), num_replicas=2, rank=1, shuffle=shuffle, seed=3)
    sampler = CloudFSSampler(PATHS, inner)
    assert len(sampler) == len(inner) == (N + 1) // 2
    loader = DataLoader(IndexDataset(), sampler=sampler, batch_size=4)
    for epoch in (0, 4):
        sampler.set_epoch(epoch)
        assert inner.epoch == epoch
        got = delivered(loader)
        assert got == shard(epoch) == hints.made[-1].indices
        assert (hints.made[-1].rank, hints.made[-1].epoch) == (1, epoch)
    if shuffle:
        assert hints.made[0].indices != hints.made[1].indices


def test_a_distributed_sampler_moves_on_without_set_epoch(hints: FakeHints) -> None:
    inner = DistributedSampler(IndexDataset(), num_replicas=2, rank=0, seed=3)
    sampler = CloudFSSampler(PATHS, inner)
    first, second = list(sampler), list(sampler)
    assert inner.epoch == 1 and first != second


def test_a_failed_announcement_still_yields_the_whole_order(
    hints: FakeHints, caplog: pytest.LogCaptureFixture
) -> None:
    hints.fail = OSError("connection refused")
    sampler = CloudFSSampler(PATHS, seed=2)
    loader = DataLoader(IndexDataset(), sampler=sampler, batch_size=4)
    with caplog.at_level(logging.WARNING, logger="cloudfs.hints.sampler"):
        got = delivered(loader)
    generator = torch.Generator()
    generator.manual_seed(2)
    assert got == torch.randperm(N, generator=generator).tolist()
    warnings = [r for r in caplog.records if r.name == "cloudfs.hints.sampler"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert "connection refused" in warnings[0].getMessage()
    assert sampler.announcement is None


def test_any_error_of_the_hints_module_is_survived(hints: FakeHints) -> None:
    class HintError(Exception):
        pass

    hints.fail = HintError("the mount refused the order")
    sampler = CloudFSSampler(PATHS, shuffle=False)
    assert list(sampler) == list(range(N))


def test_an_interrupt_is_not_swallowed(hints: FakeHints) -> None:
    hints.fail = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        iter(CloudFSSampler(PATHS))


def test_cache_first_reads_cached_samples_first_in_each_window(hints: FakeHints) -> None:
    hints.held = {path_of(i) for i in range(0, N, 3)}
    plain = list(CloudFSSampler(PATHS, seed=9))
    sampler = CloudFSSampler(PATHS, seed=9, cache_first=True, window=8)
    got = list(sampler)
    assert hints.asked[-1] == [path_of(i) for i in plain]  # asked in the drawn order
    flags = [path_of(i) in hints.held for i in plain]
    assert got == cache_first(plain, flags, 8) == hints.made[-1].indices
    assert got != plain
    first_window = got[:8]
    held_first = [i for i in first_window if path_of(i) in hints.held]
    assert first_window[: len(held_first)] == held_first


def test_cache_first_without_an_answer_reads_the_drawn_order(
    hints: FakeHints, caplog: pytest.LogCaptureFixture
) -> None:
    hints.fail_cached = OSError("no hints socket")
    plain = list(CloudFSSampler(PATHS, seed=9))
    with caplog.at_level(logging.WARNING, logger="cloudfs.hints.sampler"):
        got = list(CloudFSSampler(PATHS, seed=9, cache_first=True, window=8))
    assert got == plain == hints.made[-1].indices
    assert len([r for r in caplog.records if r.name == "cloudfs.hints.sampler"]) == 1


def test_cache_first_is_off_by_default(hints: FakeHints) -> None:
    list(CloudFSSampler(PATHS))
    assert hints.asked == []


def test_a_bad_window_is_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        CloudFSSampler(PATHS, cache_first=True, window=0)


def test_the_previous_announcement_is_closed_after_the_next_is_made(hints: FakeHints) -> None:
    sampler = CloudFSSampler(PATHS)
    list(sampler)
    assert sampler.announcement is hints.made[0] and not hints.made[0].closed
    list(sampler)
    assert hints.events == ["announce 0", "announce 1", "close 0"]
    assert sampler.announcement is hints.made[1] and not hints.made[1].closed
    sampler.close()
    assert hints.made[1].closed and sampler.announcement is None
    sampler.close()  # closing twice is harmless


def test_a_failed_announcement_ends_the_previous_one(hints: FakeHints) -> None:
    """The mount must not keep fetching along last epoch's order."""
    sampler = CloudFSSampler(PATHS)
    list(sampler)
    hints.fail = OSError("gone")
    list(sampler)
    assert hints.made[0].closed and sampler.announcement is None


def test_the_job_is_named_by_argument_environment_or_program(
    hints: FakeHints, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUDFS_JOB", "from-env")
    assert CloudFSSampler(PATHS, job="given").job == "given"
    assert CloudFSSampler(PATHS).job == "from-env"
    monkeypatch.delenv("CLOUDFS_JOB")
    assert re.fullmatch(rf".+-{os.getpid()}", CloudFSSampler(PATHS).job)
    list(CloudFSSampler(PATHS, job="given"))
    assert hints.made[-1].job == "given"


def test_the_rank_comes_from_the_environment_without_a_process_group(
    hints: FakeHints, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "3")
    sampler = CloudFSSampler(PATHS)
    list(sampler)
    assert sampler.rank == 3 and hints.made[-1].rank == 3
    monkeypatch.delenv("RANK")
    assert sampler.rank == 0


def test_a_long_order_is_announced_from_a_thread(
    hints: FakeHints, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past BACKGROUND_PATHS the loader does not wait for the mount to take the order."""
    monkeypatch.setattr(cloudfs_torch, "BACKGROUND_PATHS", 10)
    sampler = CloudFSSampler(PATHS, seed=3)
    first = list(sampler)
    second = list(sampler)
    deadline = time.monotonic() + 10
    while len(hints.made) < 2 or sampler.announcement is not hints.made[1]:
        assert time.monotonic() < deadline, "the background announcements did not land"
        time.sleep(0.01)
    assert [a.indices for a in hints.made] == [first, second]
    assert hints.made[0].closed and not hints.made[1].closed  # replaced once the next landed
    sampler.close()
    assert hints.made[1].closed
