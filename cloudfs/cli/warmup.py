"""``cloudfs warmup PATH...``: fill the cache before a job reads, check it, or drop it.

The files are found here, through the mount (directories are walked, so the
kernel checks permissions as for any reader), and sent to the mount process
by inode number over its control socket (``cloudfs.control``); the mount
fetches them with bounded parallelism into its disk tier. On a mount in a
cache group (``--cache-peers``, ``--cache-group``) each block is instead held
by its owner in the group only (``--group``, the default there): warming a
dataset costs one origin read for the whole group and no copy per node;
``--local`` also keeps a copy on this node. A progress bar shows files, bytes,
rate and ETA. ``--check`` reports the cached fraction, ``--evict``
drops the files' blocks from every tier.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from cloudfs.control import client
from cloudfs.errors import StartupError, UsageError
from cloudfs.sizes import format_size, parse_seconds

BATCH = 1000  # inodes per request


@dataclass(frozen=True, slots=True)
class Target:
    path: str
    inode: int
    size: int


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "warmup", help="fill the cache with files or directories", description=__doc__
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories on a mount")
    p.add_argument("--file-list", metavar="FILE", help="also warm the paths in FILE (one a line)")
    p.add_argument("-p", "--parallel", type=int, default=8, help="files fetched at once (8)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true", help="report how much is cached")
    action.add_argument("--evict", action="store_true", help="drop the files from the cache")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--group",
        action="store_const",
        const="group",
        dest="to",
        help="each block on its owner in the mount's cache group only (default in a group)",
    )
    where.add_argument(
        "--local",
        action="store_const",
        const="local",
        dest="to",
        help="a copy in this mount's own cache (through its group, if any)",
    )
    p.add_argument(
        "--timeout", default="600", help="seconds to wait for any progress before giving up (600)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.parallel < 1 or args.parallel > 64:
        raise UsageError("--parallel must be between 1 and 64")
    timeout = parse_seconds(args.timeout)
    paths = list(args.paths) + (_read_list(args.file_list) if args.file_list else [])
    if not paths:
        raise UsageError("give at least one PATH or --file-list")
    by_mount: dict[str, list[Target]] = defaultdict(list)
    seen: set[tuple[str, int]] = set()  # hard links and repeated paths count once
    for path in paths:
        mountpoint = client.mountpoint_of(path)
        for target in _files(path):
            if (mountpoint, target.inode) not in seen:
                seen.add((mountpoint, target.inode))
                by_mount[mountpoint].append(target)
    if args.to and (args.check or args.evict):
        raise UsageError("--group and --local go with warming, not --check or --evict")
    status = 0
    for mountpoint, targets in by_mount.items():
        if args.check:
            status |= _check(mountpoint, targets, timeout)
        elif args.evict:
            status |= _evict(mountpoint, targets, timeout)
        else:
            status |= _warm(
                mountpoint, targets, args.parallel, args.to, timeout, not args.no_progress
            )
    return status


def _read_list(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return [line.rstrip("\n") for line in f if line.strip()]
    except OSError as e:
        raise UsageError(f"cannot read --file-list {path}: {e.strerror}") from None


def _files(path: str) -> Iterator[Target]:
    """The regular files at or under ``path`` (symlinks are not followed)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    if stat.S_ISREG(st.st_mode):
        yield Target(path, st.st_ino, st.st_size)
    elif stat.S_ISDIR(st.st_mode):
        for root, _dirs, names in os.walk(path, onerror=_walk_error):
            for name in names:
                full = os.path.join(root, name)
                try:
                    st = os.stat(full, follow_symlinks=False)
                except OSError as e:
                    print(f"cloudfs: skipping {full}: {e.strerror}", file=sys.stderr)
                    continue
                if stat.S_ISREG(st.st_mode):
                    yield Target(full, st.st_ino, st.st_size)


def _walk_error(error: OSError) -> None:
    raise StartupError(f"cannot list {error.filename}: {error.strerror}")


def _batches(targets: list[Target]) -> Iterable[list[Target]]:
    for start in range(0, len(targets), BATCH):
        yield targets[start : start + BATCH]


def _warm(
    mountpoint: str,
    targets: list[Target],
    parallel: int,
    to: str | None,
    timeout: float,
    progress: bool,
) -> int:
    total = sum(t.size for t in targets)
    started = time.monotonic()
    fetched = by_group = done = 0
    failures: list[str] = []
    bar = tqdm(
        total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="warmup",
        disable=not progress or None, dynamic_ncols=True,
    )  # fmt: skip
    with bar:
        for batch in _batches(targets):
            by_inode = {t.inode: t for t in batch}
            request = {"op": "warmup", "inodes": list(by_inode), "parallel": parallel, "to": to}
            for event in client.call(mountpoint, request, timeout=timeout):
                if event.get("done"):
                    continue
                target = by_inode.get(int(event["inode"]))
                name = target.path if target else event["inode"]
                if "error" in event:
                    failures.append(f"{name}: {event['error']}")
                else:
                    fetched += int(event["fetched"])
                    by_group += int(event.get("by_group", 0))
                done += 1
                bar.update(target.size if target else 0)
                bar.set_postfix(files=f"{done}/{len(targets)}", refresh=False)
    elapsed = max(time.monotonic() - started, 1e-9)
    print(
        f"warmed up {len(targets) - len(failures)} files, {format_size(total)} "
        f"({format_size(fetched)} fetched from the object store{_by_group(by_group)}) "
        f"in {elapsed:.1f} s, {format_size(total / elapsed)}/s"
    )
    for line in failures[:10]:
        print(f"cloudfs: failed: {line}", file=sys.stderr)
    if len(failures) > 10:
        print(f"cloudfs: ... and {len(failures) - 10} more failures", file=sys.stderr)
    return 1 if failures else 0


def _by_group(by_group: int) -> str:
    return f", {format_size(by_group)} of it by the cache group's owners" if by_group else ""


def _check(mountpoint: str, targets: list[Target], timeout: float) -> int:
    totals = _summed(mountpoint, "check", targets, timeout)
    size, cached = totals["bytes"], totals["cached_bytes"]
    share = 100.0 * cached / size if size else 100.0
    print(
        f"{totals['files']} files, {format_size(size)}: {format_size(cached)} cached "
        f"({share:.1f}%), {totals['complete_files']} files completely"
    )
    if totals["failed"]:
        print(f"cloudfs: {totals['failed']} files could not be checked (gone?)", file=sys.stderr)
    return 1 if totals["failed"] else 0


def _evict(mountpoint: str, targets: list[Target], timeout: float) -> int:
    totals = _summed(mountpoint, "evict", targets, timeout)
    print(
        f"evicted {format_size(totals['evicted_bytes'])} of {totals['files']} files from the cache"
    )
    return 1 if totals["failed"] else 0


def _summed(mountpoint: str, op: str, targets: list[Target], timeout: float) -> Counter[str]:
    """The numeric results of ``op`` over all ``targets``, one request per batch, added up."""
    totals: Counter[str] = Counter()
    for batch in _batches(targets):
        request = {"op": op, "inodes": [t.inode for t in batch]}
        result = client.result(mountpoint, request, timeout=timeout)
        totals.update({k: v for k, v in result.items() if isinstance(v, int) and k != "done"})
    return totals
