"""Processes by pid and start time: alive or not, their descendants, stopping a tree.

A pid alone names a process only while it lives; with its start time (field 22
of ``/proc/PID/stat``) it names one process for good, so a restarted scheduler
re-adopts its workers without mistaking a recycled pid for one of them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path


def _stat_fields(stat: Path) -> list[str] | None:
    """The fields of a ``/proc/PID/stat`` after the command name (state first), or None
    if the process is gone."""
    try:
        text = stat.read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _all_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, ``_stat_fields``) of every process now."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(entry / "stat")) is not None:
            yield int(entry.name), fields


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None if it is gone."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    if fields is None or fields[0] == "Z":  # a zombie has finished
        return None
    return int(fields[19])


def alive(pid: int, started: int) -> bool:
    return start_time(pid) == started


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children...)."""
    children: dict[int, list[int]] = {}
    for child, fields in _all_stats():
        children.setdefault(int(fields[1]), []).append(child)
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def stop_trees(roots: Iterable[tuple[int, int]], grace: float = 5.0) -> None:
    """SIGTERM each live root (pid, start time), its process group and every descendant;
    SIGKILL whatever still runs after ``grace`` seconds.

    Descendants are looked for again while waiting (a newcomer gets its SIGTERM
    then), and each root's process group (a root leads its own session) is
    signalled too: a child started after the first look, or orphaned when its
    parent died, is still reached.
    """
    live = [(pid, started) for pid, started in roots if alive(pid, started)]
    groups = [pid for pid, _ in live]
    targets: dict[int, int] = {}  # pid -> start time

    def scan(sig: int, *, everyone: bool) -> None:
        new: dict[int, int] = {}
        for pid, started in live:
            if alive(pid, started):
                for p in [pid, *descendants(pid)]:
                    st = start_time(p)
                    if st is not None and p not in targets:
                        new[p] = st
        targets.update(new)
        _signal(targets if everyone else new, sig)
        if everyone:
            for pgid in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, sig)

    scan(signal.SIGTERM, everyone=True)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _any_left(targets, groups):
            return
        time.sleep(0.05)
        scan(signal.SIGTERM, everyone=False)
    scan(signal.SIGKILL, everyone=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _any_left(targets, groups):
        time.sleep(0.05)


def _any_left(targets: dict[int, int], groups: list[int]) -> bool:
    """Whether a target, or a member of one of ``groups``, still runs (zombies do not)."""
    if any(alive(p, s) for p, s in targets.items()):
        return True
    wanted = set(groups)
    return any(f[0] != "Z" and int(f[2]) in wanted for _, f in _all_stats())


def _signal(targets: dict[int, int], sig: int) -> None:
    for pid, started in targets.items():
        if alive(pid, started):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


def usage(roots: Iterable[tuple[int, int]]) -> tuple[float, int]:
    """CPU seconds and resident bytes of the live roots and all their descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    cpu, rss = 0.0, 0
    seen: set[int] = set()
    for pid, started in roots:
        if not alive(pid, started):
            continue
        for p in [pid, *descendants(pid)]:
            if p in seen:
                continue
            seen.add(p)
            fields = _stat_fields(Path(f"/proc/{p}/stat"))
            if fields is None:
                continue
            cpu += (int(fields[11]) + int(fields[12])) / tick
            rss += int(fields[21]) * page
    return cpu, rss
