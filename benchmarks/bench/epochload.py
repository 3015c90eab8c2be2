"""PyTorch DataLoader epochs over a CloudFS mount, driven epoch by epoch (issue: epoch hints).

The loader runs in a child process (``python3 -m bench.epochload``) that lives for all
the epochs of one run, so that an announced order stays alive between epochs the way it
does in a training job. Between epochs the parent drops the kernel's caches, reads the
mount's metrics and the proxy's counts; the two talk in JSON lines:

    parent -> child   {"paths": [...], "workers": W, "batch_size": B, "mode": M,
                       "seed": S, "epochs": [1, 2, 3], "job": NAME, "window": N,
                       "max_files": F or null}
    child -> parent   {"ready": E}            (before each epoch; E null after the last)
    parent -> child   "go"                    (or "exit" once E is null)
    child -> parent   {"epoch": E, "seconds": ..., "files": ..., "bytes": ...,
                       "announced_cached": ratio or null, ...}

Modes (the shuffle is the same seeded permutation per epoch in all of them):

- ``plain``: a seeded shuffle, nothing announced;
- ``announce``: the same order, announced to the mount at the start of each epoch
  (``cloudfs.torch.CloudFSSampler`` wrapping the seeded sampler when that module
  exists, else ``cloudfs.hints.announce`` straight from the sampler's ``__iter__``);
- ``cache_first``: ``CloudFSSampler(cache_first=True)``: within windows of the order,
  the samples the mount holds come first.

Each item opens its file, reads all of it and returns its length (``bench.torchload``):
no decoding, so what is measured is the filesystem.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent  # benchmarks/
REPO_ROOT = BENCH_DIR.parent
MODES = ("plain", "announce", "cache_first")


class EpochFailed(RuntimeError):
    """The loader child failed, or an epoch ran past its time limit."""


# --- the child side -------------------------------------------------------------------


def _sampler(spec: dict[str, Any]) -> Any:
    """The sampler for ``spec['mode']`` and a function giving the last announcement's
    predicted cached ratio (None when nothing was announced)."""
    import torch
    from torch.utils.data import Sampler

    paths: list[str] = spec["paths"]
    seed = int(spec["seed"])

    class SeededShuffle(Sampler[int]):
        """A new seeded permutation per epoch (``set_epoch``), the same in every mode."""

        def __init__(self) -> None:
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __len__(self) -> int:
            return len(paths)

        def __iter__(self) -> Iterator[int]:
            g = torch.Generator()
            g.manual_seed(seed * 1_000_003 + self.epoch)
            return iter(torch.randperm(len(paths), generator=g).tolist())

    base = SeededShuffle()
    mode = spec["mode"]
    if mode == "plain":
        return base, base
    job = spec["job"]
    try:
        from cloudfs.torch import CloudFSSampler
    except ImportError:
        CloudFSSampler = None
    if CloudFSSampler is not None:
        sampler = CloudFSSampler(
            paths,
            sampler=base,
            cache_first=mode == "cache_first",
            window=int(spec["window"]),
            job=job,
        )
        return sampler, base
    if mode == "cache_first":
        raise EpochFailed("cache_first needs cloudfs.torch.CloudFSSampler, not in this checkout")
    from cloudfs import hints

    class AnnouncingSampler(Sampler[int]):
        """Stand-in for CloudFSSampler: announce each epoch's order from ``__iter__``."""

        def __init__(self) -> None:
            self.announcement: Any = None
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch
            base.set_epoch(epoch)

        def __len__(self) -> int:
            return len(paths)

        def __iter__(self) -> Iterator[int]:
            order = list(base)
            previous = self.announcement
            self.announcement = hints.announce((paths[i] for i in order), job=job, epoch=self.epoch)
            if previous is not None:
                previous.close()  # after: the new order has replaced it on the mount
            return iter(order)

    return AnnouncingSampler(), base


def _announced_cached(sampler: Any) -> float | None:
    """The mount's predicted cached fraction for the order just announced, if known."""
    ann = getattr(sampler, "announcement", None) or getattr(sampler, "_announcement", None)
    ratios = getattr(ann, "cached_ratio", None)
    if isinstance(ratios, dict) and ratios:
        return float(sum(ratios.values()) / len(ratios))
    return None


def child_main() -> int:
    import torch
    from torch.utils.data import DataLoader

    from bench.torchload import FileDataset

    torch.set_num_threads(1)
    spec = json.loads(sys.stdin.readline())
    sampler, base = _sampler(spec)
    loader = DataLoader(
        FileDataset(spec["paths"]),
        batch_size=int(spec["batch_size"]),
        sampler=sampler,
        num_workers=int(spec["workers"]),
    )
    max_files = spec.get("max_files")

    def say(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for epoch in spec["epochs"]:
        say({"ready": epoch})
        if sys.stdin.readline().strip() != "go":
            return 1
        setter = getattr(sampler, "set_epoch", None)
        if setter is not None:
            setter(epoch)
        else:
            base.set_epoch(epoch)
        start = time.perf_counter()
        files = total = 0
        first_batch = None
        for batch in loader:
            if first_batch is None:
                first_batch = time.perf_counter() - start
            files += len(batch)
            total += int(batch.sum())
            if max_files and files >= max_files:
                break
        seconds = time.perf_counter() - start
        say(
            {
                "epoch": epoch,
                "seconds": seconds,
                "files": files,
                "bytes": total,
                "files_s": files / seconds,
                "first_batch_s": first_batch,
                "cut": bool(max_files and files < len(spec["paths"])),
                "announced_cached": _announced_cached(sampler),
                "sampler": type(sampler).__module__ + "." + type(sampler).__name__,
            }
        )
    say({"ready": None})
    sys.stdin.readline()
    return 0


# --- the parent side ------------------------------------------------------------------


class LoaderChild:
    """One loader process: ``ready()`` waits for it to be set for the next epoch,
    ``epoch()`` starts that epoch and waits for its result (bounded in time)."""

    def __init__(self, spec: dict[str, Any], log_path: Path) -> None:
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join(
            [str(BENCH_DIR), str(REPO_ROOT), *([path] if path else [])]
        )
        self._stderr = open(log_path, "ab")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.epochload"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        self._log_path = log_path
        self._buf = b""
        self._send(json.dumps(spec))

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as e:
            raise EpochFailed(f"loader child gone: {e}; {self._tail()}") from None

    def _receive(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EpochFailed(f"loader child silent for {timeout:.0f} s")
                if not sel.select(min(left, 1.0)):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EpochFailed(f"loader child exited ({self.proc.wait()}): {self._tail()}")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def _tail(self) -> str:
        try:
            lines = self._log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-4:])

    def ready(self, timeout: float) -> Any:
        return self._receive(timeout)["ready"]

    def epoch(self, timeout: float) -> dict[str, Any]:
        self._send("go")
        return self._receive(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(EpochFailed):
                self._send("exit")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._stderr.close()


if __name__ == "__main__":
    sys.exit(child_main())
