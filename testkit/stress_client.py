"""Client processes for the tree-service stress tests: each talks gRPC (``GrpcMeta``) itself.

``run_clients`` starts one process per ``Job`` (multiprocessing, *spawn*: a
fresh interpreter, no forked gRPC state), and collects what each returns
within a bounded time; stragglers are killed. The work functions:

* ``mix``: a random mix of create, mkdir, rename (files and directories,
  across directories), link, unlink, rmdir, setattr, readdir and
  open/unlink/release on a small shared set of names, so that clients
  collide; and, every few operations, renames of a directory of the
  client's own into its own subtree, which must fail with EINVAL.
* ``create_race``: at a barrier shared by every racer, create (or mkdir) the
  same names at once; returns each outcome.
* ``rename_over``: create a temporary name and rename it over ``target``,
  again and again; ``lookup_loop``: look ``target`` up meanwhile.

Every call is timed; errors are kept as (errno name, when, message) so the
test decides which errors a window of failures (a killed server) allows.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import queue
import random
import stat
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cloudfs.errors import FsError
from cloudfs.meta.client.grpc_meta import GrpcMeta
from cloudfs.types import ROOT_INODE, AttrChanges, InodeId

R = ROOT_INODE
FILE = stat.S_IFREG | 0o644
DIR = stat.S_IFDIR | 0o755
NAMES = [b"a", b"b", b"c", b"d", b"e"]
# what a namespace operation may answer when another client changed the tree under it
EXPECTED = {
    errno.ENOENT,
    errno.EEXIST,
    errno.ENOTEMPTY,
    errno.EINVAL,  # a directory renamed into its own subtree
    errno.ENOTDIR,
    errno.EISDIR,
    errno.EPERM,  # link of a directory
}
SLOW = 1.0  # calls slower than this are listed with their time


@dataclass
class Outcome:
    """What one client process did: counts per (operation, result), errors, timings."""

    name: str
    counts: Counter[str] = field(default_factory=Counter)  # "op:ok" / "op:ENOENT"
    errors: list[tuple[str, float, str]] = field(default_factory=list)  # unexpected ones
    slow: list[tuple[str, float, float]] = field(default_factory=list)  # (op, start, seconds)
    successes: list[float] = field(default_factory=list)  # wall time of each success
    max_latency: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    crashed: str = ""

    def ok(self, op: str) -> int:
        return self.counts[f"{op}:ok"]


class Client:
    """One ``GrpcMeta`` and the bookkeeping of every call made through it."""

    def __init__(self, address: str, volume: str, name: str, timeout: float) -> None:
        self.meta = GrpcMeta(address, volume, timeout=timeout, listing_timeout=timeout)
        self.out = Outcome(name)
        self.last_error = ""  # the errno name of the last failed call

    def call(
        self, op: str, fn: Callable[..., Any], *args: Any, expected: set[int] = EXPECTED
    ) -> Any:
        """``fn(*args)``: its result (True for None), or None when it failed (counted)."""
        start = time.time()
        t0 = time.monotonic()
        try:
            result = fn(*args)
        except FsError as exc:
            code = errno.errorcode.get(exc.errno, str(exc.errno))
            self.last_error = code
            self.out.counts[f"{op}:{code}"] += 1
            if exc.errno not in expected:
                self.out.errors.append((code, start, f"{op}: {exc}"))
            return None
        finally:
            took = time.monotonic() - t0
            self.out.max_latency = max(self.out.max_latency, took)
            if took > SLOW:
                self.out.slow.append((op, start, took))
        self.out.counts[f"{op}:ok"] += 1
        self.out.successes.append(time.time())
        return result if result is not None else True

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the server may be gone: the session expires
            self.meta.close()


# -- the random mix -------------------------------------------------------------


def _pick_dir(c: Client, rng: random.Random) -> InodeId:
    """The root or a directory up to two shared names below it."""
    d = InodeId(R)
    for _ in range(rng.randint(0, 2)):
        name = rng.choice(NAMES)
        attr = c.call("lookup", c.meta.lookup, d, name)
        if not attr or not attr.is_dir:
            break
        d = attr.inode
    return d


def _own_subtree(c: Client, tag: str) -> tuple[InodeId, InodeId, InodeId]:
    """p<tag>/x/y, which only this client touches."""
    made = [InodeId(R)]
    for name in (f"p{tag}".encode(), b"x", b"y"):
        try:
            made.append(c.meta.mkdir(made[-1], name, DIR, 0, 0).inode)
        except FsError as exc:  # made by an earlier try whose answer was lost
            if exc.errno != errno.EEXIST:
                raise
            made.append(c.meta.lookup(made[-1], name).inode)
    return made[1], made[2], made[3]


def _set_up(c: Client, tag: str, within: float = 30.0) -> tuple[InodeId, InodeId, InodeId]:
    """Open the session and make the client's own subtree, retrying while the server is
    unreachable (a test may be killing it as the client starts)."""
    deadline = time.monotonic() + within
    started = False
    while True:
        try:
            if not started:
                c.meta.start_session()
                started = True
            return _own_subtree(c, tag)
        except FsError as exc:
            if exc.errno != errno.EIO or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _into_own_subtree(c: Client, tag: str, p: InodeId, x: InodeId, y: InodeId) -> None:
    """Each of these renames moves a directory below itself: EINVAL, and nothing changes."""
    cases = [
        (p, b"x", y, b"z"),  # x into its grandchild
        (p, b"x", x, b"z"),  # x into itself
        (InodeId(R), f"p{tag}".encode(), y, b"z"),  # the top into its grandchild
    ]
    for parent, name, new_parent, new_name in cases:
        try:
            c.meta.rename(parent, name, new_parent, new_name)
        except FsError as exc:
            code = errno.errorcode.get(exc.errno, str(exc.errno))
            c.out.counts[f"rename-into-self:{code}"] += 1
            if exc.errno != errno.EINVAL:
                c.out.errors.append((code, time.time(), f"rename into own subtree: {exc}"))
            continue
        c.out.counts["rename-into-self:ok"] += 1
        c.out.errors.append(("SUCCEEDED", time.time(), "a rename into its own subtree succeeded"))


def _one_op(c: Client, rng: random.Random) -> None:
    m = c.meta
    op = rng.choices(
        ["create", "mkdir", "rename", "link", "unlink", "rmdir", "setattr", "readdir", "open"],
        weights=[4, 3, 5, 2, 3, 2, 1, 1, 1],
    )[0]
    d = _pick_dir(c, rng)
    name = rng.choice(NAMES)
    if op == "create":
        c.call(op, m.create, d, name, FILE, 0, 0)
    elif op == "mkdir":
        c.call(op, m.mkdir, d, name, DIR, 0, 0)
    elif op == "rename":
        d2, name2 = _pick_dir(c, rng), rng.choice(NAMES)
        c.call(op, m.rename, d, name, d2, name2)
    elif op == "link":  # a file of d (not a directory: that is EPERM, rarely worth a try)
        for candidate in rng.sample(NAMES, len(NAMES)):
            attr = c.call("lookup", m.lookup, d, candidate)
            if attr and (not attr.is_dir or rng.random() < 0.1):
                d2, name2 = _pick_dir(c, rng), rng.choice(NAMES)
                c.call(op, m.link, attr.inode, d2, name2)
                break
    elif op == "unlink":
        c.call(op, m.unlink, d, name)
    elif op == "rmdir":
        c.call(op, m.rmdir, d, name)
    elif op == "setattr":
        attr = c.call("lookup", m.lookup, d, name)
        if attr:
            mode = rng.choice([0o600, 0o644, 0o755])
            changes = AttrChanges(mode=mode, mtime_ns=time.time_ns())
            c.call(op, m.setattr, attr.inode, changes)
    elif op == "readdir":
        c.call(op, m.readdir, d, None, 100)
    else:  # open, maybe unlink while open, release: an orphan lives until the release
        attr = c.call("lookup", m.lookup, d, name)
        if attr and not attr.is_dir and c.call("open", m.open, attr.inode):
            if rng.random() < 0.5:
                c.call("unlink", m.unlink, d, name)
            c.call("release", m.release, attr.inode, expected=set())


def mix(address: str, volume: str, tag: str, seed: int, duration: float) -> Outcome:
    """The random mix for ``duration`` seconds (see the module docstring)."""
    c = Client(address, volume, f"mix-{tag}", timeout=45.0)
    rng = random.Random(seed)
    try:
        own = _set_up(c, tag)
        deadline = time.monotonic() + duration
        i = 0
        while time.monotonic() < deadline:
            i += 1
            if i % 20 == 0:
                _into_own_subtree(c, tag, *own)
            else:
                _one_op(c, rng)
    finally:
        c.close()
    return c.out


# -- one name, many creators ------------------------------------------------------


def create_race(
    address: str, volume: str, tag: str, names: list[tuple[bytes, bool]], barrier: Any
) -> Outcome:
    """For each (name, is a directory): wait at ``barrier`` with the other racers, then
    create it; ``extra["results"]`` says "ok" or the errno name for each."""
    c = Client(address, volume, f"race-{tag}", timeout=45.0)
    results: list[str] = []
    try:
        for name, directory in names:
            barrier.wait(timeout=60)
            op = "mkdir" if directory else "create"
            make = c.meta.mkdir if directory else c.meta.create
            got = c.call(
                op, make, R, name, DIR if directory else FILE, 0, 0, expected={errno.EEXIST}
            )
            results.append("ok" if got else c.last_error)
    finally:
        c.close()
    c.out.extra["results"] = results
    return c.out


# -- rename over a name that always exists ----------------------------------------


def rename_over(
    address: str, volume: str, tag: str, target: bytes, duration: float, directories: bool
) -> Outcome:
    """Make ``tmp-<tag>-N``, rename it over ``target``; repeat for ``duration`` seconds."""
    c = Client(address, volume, f"renamer-{tag}", timeout=45.0)
    try:
        deadline = time.monotonic() + duration
        n = 0
        while time.monotonic() < deadline:
            n += 1
            tmp = f"tmp-{tag}-{n}".encode()
            kind = DIR if directories else FILE
            if c.call("make", c.meta.mkdir if directories else c.meta.create, R, tmp, kind, 0, 0):
                c.call("rename", c.meta.rename, R, tmp, R, target, expected=set())
    finally:
        c.close()
    return c.out


def lookup_loop(
    address: str, volume: str, tag: str, targets: list[bytes], duration: float
) -> Outcome:
    """Look ``targets`` up (and list the root) for ``duration`` seconds: every lookup
    must find an inode, every listing must hold every target."""
    c = Client(address, volume, f"reader-{tag}", timeout=45.0)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            for target in targets:
                attr = c.call("lookup", c.meta.lookup, R, target, expected=set())
                if attr:
                    seen.add(int(attr.inode))
            listed = c.call("readdir", c.meta.readdir, R, None, 1000, expected=set())
            missing = set(targets) - {e.name for e in listed or []}
            if listed is not None and missing:
                c.out.errors.append(("MISSING", time.time(), f"readdir without {missing}"))
    finally:
        c.close()
    c.out.extra["inodes_seen"] = len(seen)
    return c.out


def make_and_look(
    address: str, volume: str, tag: str, duration: float, directories: bool
) -> Outcome:
    """Make ``n-<tag>-N``, look it up at once, remove it; for ``duration`` seconds. Nobody
    else touches these names: a lookup that fails means the tree lost the entry."""
    c = Client(address, volume, f"maker-{tag}", timeout=45.0)
    try:
        deadline = time.monotonic() + duration
        n = 0
        while time.monotonic() < deadline:
            n += 1
            name = f"n-{tag}-{n}".encode()
            make, mode = (c.meta.mkdir, DIR) if directories else (c.meta.create, FILE)
            if not c.call("make", make, R, name, mode, 0, 0, expected=set()):
                continue
            c.call("lookup", c.meta.lookup, R, name, expected=set())
            remove = c.meta.rmdir if directories else c.meta.unlink
            c.call("remove", remove, R, name, expected=set())
    finally:
        c.close()
    return c.out


def refresh_loop(address: str, volume: str, tag: str, duration: float) -> Outcome:
    """Look up a name nobody makes, over and over: each lookup of a directory whose
    listing is stale lists it from the UFS and merges the listing."""
    c = Client(address, volume, f"refresher-{tag}", timeout=45.0)
    try:
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            c.call("lookup", c.meta.lookup, R, b"no-such-name", expected={errno.ENOENT})
    finally:
        c.close()
    return c.out


# -- running them -------------------------------------------------------------------


@dataclass
class Job:
    fn: Callable[..., Outcome]
    args: tuple[Any, ...]


def _child(job: Job, results: Any) -> None:
    try:
        out = job.fn(*job.args)
    except BaseException as exc:  # reported to the test, whatever it is
        out = Outcome(f"{job.fn.__name__}{job.args[2:3]}", crashed=traceback.format_exc())
        if isinstance(exc, KeyboardInterrupt):
            raise
    results.put((os.getpid(), out))


def context() -> Any:
    """The multiprocessing context the clients run in (for barriers shared with them)."""
    return multiprocessing.get_context("spawn")


def run_clients(
    jobs: list[Job], timeout: float, during: Callable[[], None] | None = None
) -> list[Outcome]:
    """Run every job in a process of its own; ``during`` runs here meanwhile.

    Raises ``AssertionError`` when a process does not report within ``timeout``
    seconds (it is killed) or crashed.
    """
    ctx = context()
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(job, results), daemon=True) for job in jobs]
    for p in procs:
        p.start()
    outcomes: list[Outcome] = []
    deadline = time.monotonic() + timeout
    try:
        if during is not None:
            during()
        while len(outcomes) < len(procs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{len(procs) - len(outcomes)} client process(es) still running after "
                    f"{timeout} s: a call hung"
                )
            try:
                _, out = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            outcomes.append(out)
    finally:
        for p in procs:
            p.join(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    crashed = [o for o in outcomes if o.crashed]
    assert not crashed, "client process crashed:\n" + "\n".join(o.crashed for o in crashed)
    return outcomes
